"""The addresses clients in the Kubernetes cluster connect to, by the Services' DNS names:
what an NsqCluster's status.listeners says (as Strimzi's Kafka status does)."""
from __future__ import annotations

from ..constants import LOOKUPD_HTTP_PORT, NSQD_HTTP_PORT, NSQD_HTTPS_PORT, NSQD_TCP_PORT
from ..models import NsqCluster
from ..models.cluster import Listener
from . import names
from .admin import ADMIN_HTTP_PORT, admin_name


def client_listeners(cluster: NsqCluster) -> list[Listener]:
    nsqd = names.service_dns(cluster, names.nsqd_client_service(cluster))
    found = [Listener(name="nsqd-tcp", address=f"{nsqd}:{NSQD_TCP_PORT}"),
             Listener(name="nsqd-http", address=f"{nsqd}:{NSQD_HTTP_PORT}")]
    if cluster.spec.tls is not None:
        found.append(Listener(name="nsqd-https", address=f"{nsqd}:{NSQD_HTTPS_PORT}"))
    lookupd = names.service_dns(cluster, names.lookupd_headless_service(cluster))
    found.append(Listener(name="lookupd-http", address=f"{lookupd}:{LOOKUPD_HTTP_PORT}"))
    if cluster.spec.admin.enabled:
        admin = names.service_dns(cluster, admin_name(cluster))
        found.append(Listener(name="nsqadmin-http", address=f"{admin}:{ADMIN_HTTP_PORT}"))
    return found
