"""The roller's timer: one step of a rolling upgrade or scale-down per tick, nothing at
all while the cluster is paused or its spec is invalid."""
from __future__ import annotations

from typing import Any

import kopf

from ..models.cluster import is_paused
from ..reconcile.cluster import parse
from ..rollout.roller import Blocked, roll, settled
from ..runtime import runtime_of
from ..status.errors import BadSpec
from .unguarded import Gone


async def cluster_rollout(body: Any, memo: Any, **_: Any) -> None:
    rt = runtime_of(memo, _)
    if is_paused(body) or body["metadata"].get("deletionTimestamp"):
        return
    try:
        if await settled(rt, parse(body, rt.default_image, rt.operator_pod), dict(body)):
            return
    except BadSpec:
        return  # the reconcile handler reports it
    # read afresh: kopf's copy may not show the rollout status this timer wrote a tick ago
    meta = body["metadata"]
    body = await rt.kube.get("NsqCluster", meta["namespace"], meta["name"])
    if body is None:
        raise Gone("reading it answers 404")  # a deletion kopf's watch did not tell of
    if is_paused(body) or body["metadata"].get("deletionTimestamp"):
        return
    try:
        cluster = parse(body, rt.default_image, rt.operator_pod)
    except BadSpec:
        return
    try:
        await roll(rt, cluster, body)
    except Blocked as e:
        raise kopf.TemporaryError(str(e), delay=e.delay) from None
