"""The readiness gate of nsqd pods, and the indexes of declared topics and channels it
reads (kopf keeps them in memory from the watch streams).

Pods get an event handler, not a timer: a timer would put a finalizer on every nsqd pod,
and a pod must stay deletable while the operator is down. A gate that fails to open here
is opened by the cluster's periodic pass."""
from __future__ import annotations

import copy
from typing import Any

import kopf

from ..constants import INSTANCE_LABEL
from ..kube.pods import is_serving, topology_ready
from ..reconcile.gate import REACH_ERRORS, open_gate
from ..runtime import cluster_domain_of, runtime_of
from ..status.errors import BadSpec
from ..topology.wishes import channel_wish, topic_wish


def _live(body: Any) -> bool:
    return not body["metadata"].get("deletionTimestamp")


def declared_topics(body: kopf.Body, **_: Any) -> dict[Any, Any]:
    try:
        wish = topic_wish(body)
    except BadSpec:
        return {}
    return {(wish.namespace, wish.cluster): wish} if _live(body) else {}


def declared_channels(body: kopf.Body, **_: Any) -> dict[Any, Any]:
    try:
        wish = channel_wish(body)
    except BadSpec:
        return {}
    return {(wish.namespace, wish.cluster): wish} if _live(body) else {}


def managed_pods(body: kopf.Body, **_: Any) -> dict[Any, Any]:
    """The pod as the watch last showed it, by (namespace, NsqCluster)."""
    meta = body["metadata"]
    return {(meta["namespace"], (meta.get("labels") or {}).get(INSTANCE_LABEL)): copy.deepcopy(dict(body))}


def managed_statefulsets(body: kopf.Body, **_: Any) -> dict[Any, Any]:
    meta = body["metadata"]
    return {(meta["namespace"], meta["name"]): copy.deepcopy(dict(body))}


def cluster_domains(body: kopf.Body, **_: Any) -> dict[Any, Any]:
    """Every NsqCluster's DNS domain: what a topology pass needs of its cluster."""
    return {(body["metadata"]["namespace"], body["metadata"]["name"]): cluster_domain_of(body)}


def needs_gate(body: kopf.Body, **_: Any) -> bool:
    return is_serving(body) and not topology_ready(body)


async def pod_gate(body: kopf.Body, memo: Any, logger: Any, declared_topics: kopf.Index[Any, Any],
                   declared_channels: kopf.Index[Any, Any], **_: Any) -> None:
    key = (body["metadata"]["namespace"], body["metadata"]["labels"]["app.kubernetes.io/instance"])
    try:
        await open_gate(runtime_of(memo, _), body, declared_topics.get(key, []), declared_channels.get(key, []))
    except REACH_ERRORS as e:
        logger.info(f"topology gate of {body['metadata']['name']} stays closed for now: {e}")
