"""Services: headless ones give every pod a stable DNS name (published before the pod is
ready, so nsqd finds lookupd and the operator reaches a new nsqd), and a client Service
spreads producers over the ready nsqds."""
from __future__ import annotations

from typing import Any

from ..constants import (LOOKUPD_HTTP_PORT, LOOKUPD_TCP_PORT, NSQD_HTTP_PORT, NSQD_HTTPS_PORT, NSQD_REPLICATION_PORT,
                         NSQD_TCP_PORT)
from ..models import NsqCluster
from . import labels, names
from .ownership import object_meta


def _ports(tcp: int, http: int) -> list[dict[str, Any]]:
    return [{"name": "tcp", "port": tcp, "targetPort": "tcp", "protocol": "TCP"},
            {"name": "http", "port": http, "targetPort": "http", "protocol": "TCP"}]


def _service(cluster: NsqCluster, name: str, component: str, ports: list[dict[str, Any]],
             headless: bool) -> dict[str, Any]:
    spec: dict[str, Any] = {"selector": labels.selector(cluster, component), "ports": ports}
    if headless:
        spec.update(clusterIP="None", publishNotReadyAddresses=True)
    else:
        spec["type"] = "ClusterIP"
    return {"apiVersion": "v1", "kind": "Service", "metadata": object_meta(cluster, name, component), "spec": spec}


def build_lookupd_headless_service(cluster: NsqCluster) -> dict[str, Any]:
    return _service(cluster, names.lookupd_headless_service(cluster), labels.LOOKUPD,
                    _ports(LOOKUPD_TCP_PORT, LOOKUPD_HTTP_PORT), headless=True)


def _nsqd_ports(cluster: NsqCluster) -> list[dict[str, Any]]:
    ports = _ports(NSQD_TCP_PORT, NSQD_HTTP_PORT)
    if cluster.spec.tls is not None:
        ports.append({"name": "https", "port": NSQD_HTTPS_PORT, "targetPort": "https", "protocol": "TCP"})
    return ports


def build_nsqd_headless_service(cluster: NsqCluster) -> dict[str, Any]:
    """With replicated topics it carries the replication port too: peers reach each other
    by their pods' names; the client Service never does (clients have no use for it)."""
    ports = _nsqd_ports(cluster)
    if cluster.spec.nsqd.replicated is not None:
        ports.append({"name": "replication", "port": NSQD_REPLICATION_PORT, "targetPort": "replication",
                      "protocol": "TCP"})
    return _service(cluster, names.nsqd_headless_service(cluster), labels.NSQD, ports, headless=True)


def build_nsqd_client_service(cluster: NsqCluster) -> dict[str, Any]:
    return _service(cluster, names.nsqd_client_service(cluster), labels.NSQD, _nsqd_ports(cluster), headless=False)
