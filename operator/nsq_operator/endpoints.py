"""How the operator reaches a pod's HTTP API and what lookupd addresses it hands to nsqd.

Production goes by the pods' stable DNS names through the headless Services; tests plug
in their own mapping to real processes on loopback addresses."""
from __future__ import annotations

from typing import Protocol

from .builders import names
from .constants import LOOKUPD_HTTP_PORT, LOOKUPD_TCP_PORT, NSQD_HTTP_PORT, NSQD_HTTPS_PORT
from .models.cluster import ClusterRef


class Endpoints(Protocol):
    def nsqd_http(self, cluster: ClusterRef, pod: str) -> str: ...
    def nsqd_https(self, cluster: ClusterRef, pod: str) -> str: ...
    def lookupd_http(self, cluster: ClusterRef, pod: str) -> str: ...
    def lookupd_tcp(self, cluster: ClusterRef, pod: str) -> str: ...
    def nsqd_replication(self, cluster: ClusterRef, pod: str) -> str: ...


class PodDnsEndpoints:
    def nsqd_http(self, cluster: ClusterRef, pod: str) -> str:
        return f"http://{names.nsqd_broadcast_address(cluster, pod)}:{NSQD_HTTP_PORT}"

    def nsqd_https(self, cluster: ClusterRef, pod: str) -> str:
        """By the pod's DNS name, which its certificate carries (a wildcard over the headless Service)."""
        return f"https://{names.nsqd_broadcast_address(cluster, pod)}:{NSQD_HTTPS_PORT}"

    def lookupd_http(self, cluster: ClusterRef, pod: str) -> str:
        return f"http://{names.lookupd_broadcast_address(cluster, pod)}:{LOOKUPD_HTTP_PORT}"

    def lookupd_tcp(self, cluster: ClusterRef, pod: str) -> str:
        return f"{names.lookupd_broadcast_address(cluster, pod)}:{LOOKUPD_TCP_PORT}"

    def nsqd_replication(self, cluster: ClusterRef, pod: str) -> str:
        """A pod's name in the nsqds' replication peer list (as the StatefulSet's flags say it)."""
        return names.nsqd_replication_address(cluster, pod)
