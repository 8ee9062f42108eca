"""The optional NetworkPolicy on nsqd's pods (spec.networkPolicy): its TCP, HTTP and HTTPS
ports admit only the client pods the owner names, the cluster's own nsqds (a scale-down
hands its backlog to them over HTTP) and nsqadmin, the operator (drains, topics,
channels) and the peers of ``allowFrom``. nsqlookupd is not restricted: nsqd registers
with it and every client asks it where nsqd is."""
from __future__ import annotations

import copy
from typing import Any

from ..constants import NSQD_HTTP_PORT, NSQD_HTTPS_PORT, NSQD_TCP_PORT
from ..models import NsqCluster
from . import labels
from .admin import ADMIN
from .ownership import object_meta


def policy_name(cluster: NsqCluster) -> str:
    return f"{cluster.name}-nsqd"


def _peers(cluster: NsqCluster) -> list[dict[str, Any]]:
    wanted = cluster.spec.network_policy
    peers: list[dict[str, Any]] = [{"podSelector": {"matchLabels": labels.selector(cluster, component)}}
                                   for component in (labels.NSQD, ADMIN)]
    peers.append({"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": wanted.operator_namespace}},
                  "podSelector": {"matchLabels": dict(wanted.operator_labels)}})
    if wanted.client_labels:
        client: dict[str, Any] = {"podSelector": {"matchLabels": dict(wanted.client_labels)}}
        if wanted.client_namespaces is not None:
            client["namespaceSelector"] = copy.deepcopy(wanted.client_namespaces)
        peers.append(client)
    return peers + copy.deepcopy(wanted.allow_from)


def build_network_policy(cluster: NsqCluster) -> dict[str, Any] | None:
    if not cluster.spec.network_policy.enabled:
        return None
    ports = [NSQD_TCP_PORT, NSQD_HTTP_PORT] + ([NSQD_HTTPS_PORT] if cluster.spec.tls is not None else [])
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": object_meta(cluster, policy_name(cluster), labels.NSQD),
        "spec": {
            "podSelector": {"matchLabels": labels.selector(cluster, labels.NSQD)},
            "policyTypes": ["Ingress"],
            "ingress": [{"from": _peers(cluster), "ports": [{"protocol": "TCP", "port": p} for p in ports]}],
        },
    }
