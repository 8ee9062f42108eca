"""Pure builders: an NsqCluster in, the Kubernetes manifests it needs out."""
from __future__ import annotations

from typing import Any

from ..models import NsqCluster
from .admin import build_admin_deployment, build_admin_service
from .configmap import build_configmap
from .monitoring import build_pod_monitors
from .network import build_network_policy
from .pdb import build_lookupd_pdb, build_nsqd_pdb
from .serviceaccount import build_service_account
from .services import build_lookupd_headless_service, build_nsqd_client_service, build_nsqd_headless_service
from .statefulsets import build_lookupd_statefulset, build_nsqd_statefulset
from .tls import build_certificate


def build_cluster(cluster: NsqCluster) -> list[dict[str, Any]]:
    """Every object the cluster owns, in the order they are best created: identity and
    config first, lookupd before the nsqds that register with it. The kinds of optional
    APIs (cert-manager's Certificate, the Prometheus Operator's PodMonitor) are in it when
    the spec asks for them; the reconciler applies them where their API is served."""
    certificate = build_certificate(cluster)
    policy = build_network_policy(cluster)
    return [
        build_service_account(cluster),
        build_configmap(cluster),
        *([certificate] if certificate else []),
        build_lookupd_headless_service(cluster),
        build_lookupd_statefulset(cluster),
        build_lookupd_pdb(cluster),
        build_nsqd_headless_service(cluster),
        build_nsqd_client_service(cluster),
        build_nsqd_statefulset(cluster),
        build_nsqd_pdb(cluster),
        build_admin_service(cluster),
        build_admin_deployment(cluster),
        *([policy] if policy else []),
        *build_pod_monitors(cluster),
    ]


__all__ = ["build_cluster"]
