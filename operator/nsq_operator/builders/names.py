"""Names of everything a cluster owns, and the stable DNS names pods are reached by.
The builders and the live reconcilers both use these, so they never disagree."""
from __future__ import annotations

from ..constants import LOOKUPD_TCP_PORT, NSQD_REPLICATION_PORT
from ..models.cluster import ClusterRef, NsqCluster


def nsqd_statefulset(cluster: ClusterRef | NsqCluster) -> str:
    return f"{cluster.name}-nsqd"


def nsqd_headless_service(cluster: ClusterRef | NsqCluster) -> str:
    return f"{cluster.name}-nsqd-headless"


def nsqd_client_service(cluster: ClusterRef | NsqCluster) -> str:
    return f"{cluster.name}-nsqd"


def lookupd_statefulset(cluster: ClusterRef | NsqCluster) -> str:
    return f"{cluster.name}-lookupd"


def lookupd_headless_service(cluster: ClusterRef | NsqCluster) -> str:
    return f"{cluster.name}-lookupd"


def config_map(cluster: ClusterRef | NsqCluster) -> str:
    return f"{cluster.name}-nsq-config"


def service_account(cluster: ClusterRef | NsqCluster) -> str:
    return f"{cluster.name}-nsq"


def nsqd_pdb(cluster: ClusterRef | NsqCluster) -> str:
    return f"{cluster.name}-nsqd"


def lookupd_pdb(cluster: ClusterRef | NsqCluster) -> str:
    return f"{cluster.name}-lookupd"


def pod_name(statefulset: str, ordinal: int) -> str:
    return f"{statefulset}-{ordinal}"


def nsqd_pods(cluster: NsqCluster, replicas: int | None = None) -> list[str]:
    count = cluster.spec.nsqd.replicas if replicas is None else replicas
    return [pod_name(nsqd_statefulset(cluster), i) for i in range(count)]


def lookupd_pods(cluster: NsqCluster, replicas: int | None = None) -> list[str]:
    count = cluster.spec.lookupd.replicas if replicas is None else replicas
    return [pod_name(lookupd_statefulset(cluster), i) for i in range(count)]


def pod_dns(pod: str, service: str, namespace: str, domain: str = "") -> str:
    """A StatefulSet pod's stable name through its headless Service; without the cluster's
    DNS domain it is completed by the search path of pods in the cluster."""
    name = f"{pod}.{service}.{namespace}.svc"
    return f"{name}.{domain}" if domain else name


def nsqd_broadcast_address(cluster: ClusterRef | NsqCluster, pod: str) -> str:
    return pod_dns(pod, nsqd_headless_service(cluster), cluster.namespace, cluster.domain)


def nsqd_replication_address(cluster: ClusterRef | NsqCluster, pod: str) -> str:
    """Where an nsqd listens for its peers' copies (nsqd's --replication-address), and its
    name in their --replication-peer lists: stable across restarts and replacements."""
    return f"{nsqd_broadcast_address(cluster, pod)}:{NSQD_REPLICATION_PORT}"


def nsqd_replication_peers(cluster: NsqCluster, replicas: int | None = None) -> list[str]:
    """Every nsqd's replication address, in ordinal order: the same list on every nsqd."""
    return [nsqd_replication_address(cluster, pod) for pod in nsqd_pods(cluster, replicas)]


def lookupd_broadcast_address(cluster: ClusterRef | NsqCluster, pod: str) -> str:
    return pod_dns(pod, lookupd_headless_service(cluster), cluster.namespace, cluster.domain)


def lookupd_tcp_addresses(cluster: NsqCluster, replicas: int | None = None) -> list[str]:
    """Every lookupd by DNS name, as nsqd's --lookupd-tcp-address wants them."""
    return [f"{lookupd_broadcast_address(cluster, pod)}:{LOOKUPD_TCP_PORT}" for pod in lookupd_pods(cluster, replicas)]


def service_dns(cluster: ClusterRef | NsqCluster, service: str) -> str:
    name = f"{service}.{cluster.namespace}.svc"
    return f"{name}.{cluster.domain}" if cluster.domain else name
