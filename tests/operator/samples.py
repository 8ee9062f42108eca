"""Example objects the operator tests share."""
from __future__ import annotations

from typing import Any

from nsq_operator.models import NsqCluster


def cluster_body(name: str = "demo", namespace: str = "ns1", **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "nsq.dev/v1alpha1", "kind": "NsqCluster",
            "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}", "generation": 1},
            "spec": spec}


def cluster(name: str = "demo", namespace: str = "ns1", **spec: Any) -> NsqCluster:
    return NsqCluster.from_body(cluster_body(name, namespace, **spec))
