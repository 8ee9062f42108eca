"""The optional NetworkPolicy on nsqd's pods (spec.networkPolicy): its TCP, HTTP and HTTPS
ports admit only the client pods the owner names, the cluster's own nsqds (a scale-down
hands its backlog to them over HTTP) and nsqadmin, the operator (drains, topics,
channels: from the namespace and with the labels it runs with, wherever it is installed)
and the peers of ``allowFrom``; the peers of ``httpFrom`` (Prometheus, KEDA) reach the
HTTP API only. With replicated topics the replication port admits the cluster's own nsqds
and nobody else. nsqlookupd is not restricted: nsqd registers
with it and every client asks it where nsqd is."""
from __future__ import annotations

import copy
from typing import Any, Mapping

from ..constants import NSQD_HTTP_PORT, NSQD_HTTPS_PORT, NSQD_REPLICATION_PORT, NSQD_TCP_PORT
from ..models import NsqCluster
from ..models.network import FALLBACK_LABELS, FALLBACK_NAMESPACE
from . import labels
from .admin import ADMIN
from .ownership import object_meta


NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"


def policy_name(cluster: NsqCluster) -> str:
    return f"{cluster.name}-nsqd"


def _operator_peer(namespace: str, pod_labels: Mapping[str, str]) -> dict[str, Any]:
    # every namespace carries kubernetes.io/metadata.name (the apiserver sets it)
    return {"namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: namespace}},
            "podSelector": {"matchLabels": dict(pod_labels)}}


def operator_peers(cluster: NsqCluster) -> list[dict[str, Any]]:
    """The operator running the cluster, from the namespace and labels it runs with (the
    chart tells it: POD_NAMESPACE, OPERATOR_POD_LABELS), and the one the spec names, if any."""
    wanted = cluster.spec.network_policy
    own = cluster.operator_pod
    peers = [] if own is None else [_operator_peer(own.namespace, own.labels)]
    if own is None or wanted.operator_namespace is not None or wanted.operator_labels is not None:
        named = _operator_peer(wanted.operator_namespace or (own.namespace if own else FALLBACK_NAMESPACE),
                               wanted.operator_labels if wanted.operator_labels is not None
                               else (own.labels if own else FALLBACK_LABELS))
        if named not in peers:
            peers.append(named)
    return peers


def _peers(cluster: NsqCluster) -> list[dict[str, Any]]:
    wanted = cluster.spec.network_policy
    peers: list[dict[str, Any]] = [{"podSelector": {"matchLabels": labels.selector(cluster, component)}}
                                   for component in (labels.NSQD, ADMIN)]
    peers += operator_peers(cluster)
    if wanted.client_labels:
        client: dict[str, Any] = {"podSelector": {"matchLabels": dict(wanted.client_labels)}}
        if wanted.client_namespaces is not None:
            client["namespaceSelector"] = copy.deepcopy(wanted.client_namespaces)
        peers.append(client)
    return peers + copy.deepcopy(wanted.allow_from)


def build_network_policy(cluster: NsqCluster) -> dict[str, Any] | None:
    if not cluster.spec.network_policy.enabled:
        return None
    http = [NSQD_HTTP_PORT] + ([NSQD_HTTPS_PORT] if cluster.spec.tls is not None else [])
    ports = [NSQD_TCP_PORT, *http]
    rules = [{"from": _peers(cluster), "ports": [{"protocol": "TCP", "port": p} for p in ports]}]
    if cluster.spec.nsqd.replicated is not None:  # replicated topics: the cluster's own nsqds copy to each other
        rules.append({"from": [{"podSelector": {"matchLabels": labels.selector(cluster, labels.NSQD)}}],
                      "ports": [{"protocol": "TCP", "port": NSQD_REPLICATION_PORT}]})
    if cluster.spec.network_policy.http_from:  # scrapers: the HTTP API only
        rules.append({"from": copy.deepcopy(cluster.spec.network_policy.http_from),
                      "ports": [{"protocol": "TCP", "port": p} for p in http]})
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": object_meta(cluster, policy_name(cluster), labels.NSQD),
        "spec": {
            "podSelector": {"matchLabels": labels.selector(cluster, labels.NSQD)},
            "policyTypes": ["Ingress"],
            "ingress": rules,
        },
    }
