"""app.kubernetes.io/* labels and the selectors built from them."""
from __future__ import annotations

from ..constants import MANAGED_BY
from ..models.cluster import ClusterRef, NsqCluster

NAME = "nsq"
NSQD = "nsqd"
LOOKUPD = "nsqlookupd"


def selector(cluster: ClusterRef | NsqCluster, component: str) -> dict[str, str]:
    """The labels a component's pods are selected by (immutable once a StatefulSet exists)."""
    return {"app.kubernetes.io/name": NAME, "app.kubernetes.io/instance": cluster.name,
            "app.kubernetes.io/component": component}


def labels(cluster: ClusterRef | NsqCluster, component: str | None = None) -> dict[str, str]:
    base = {"app.kubernetes.io/name": NAME, "app.kubernetes.io/instance": cluster.name,
            "app.kubernetes.io/managed-by": MANAGED_BY, "app.kubernetes.io/part-of": "nsq"}
    if component:
        base["app.kubernetes.io/component"] = component
    return base


def selector_string(cluster: ClusterRef | NsqCluster, component: str) -> str:
    return ",".join(f"{k}={v}" for k, v in selector(cluster, component).items())

