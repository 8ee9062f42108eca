"""NsqTopic and NsqChannel handlers: thin wrappers around reconcile.topology."""
from __future__ import annotations

from typing import Any

import kopf

from ..reconcile.freshness import Superseded
from ..reconcile.topology import NotYet, delete_topology, reconcile_topology
from ..runtime import runtime_of
from ..status import conditions
from ..topology.removal import Refused
from ..status.errors import BadSpec
from .status_patch import report, snapshot


def _declared(body: Any, declared_topics: kopf.Index[Any, Any], declared_channels: kopf.Index[Any, Any]) -> list[Any]:
    """The live declarations of the object's kind for its cluster (kopf's in-memory indexes)."""
    index = declared_topics if body["kind"] == "NsqTopic" else declared_channels
    key = (body["metadata"]["namespace"], (body.get("spec") or {}).get("cluster"))
    return list(index.get(key, []))


async def topology_changed(body: Any, patch: kopf.Patch, memo: Any, declared_topics: kopf.Index[Any, Any],
                           declared_channels: kopf.Index[Any, Any], **_: Any) -> None:
    rt = runtime_of(memo, _)
    live, body = body, snapshot(body)
    try:
        result = await reconcile_topology(rt, body, _declared(body, declared_topics, declared_channels), live)
    except BadSpec as e:
        report(patch, body, {}, conditions.degraded("InvalidSpec", str(e)), memo)
        raise kopf.PermanentError(f"invalid spec: {e}") from None
    except NotYet as e:  # the periodic pass reports what follows
        report(patch, body, {}, conditions.progressing("Waiting", str(e)), memo)
        return
    except Superseded:
        return  # the newer generation has its own pass
    report(patch, body, result.status, result.verdict, memo)


async def topology_tick(body: Any, patch: kopf.Patch, memo: Any, declared_topics: kopf.Index[Any, Any],
                        declared_channels: kopf.Index[Any, Any], **_: Any) -> None:
    """Periodic: put back what vanished or was flipped by hand, count messages, and act
    on empty requests."""
    live, body = body, snapshot(body)
    try:
        result = await reconcile_topology(runtime_of(memo, _), body, _declared(body, declared_topics, declared_channels),
                                          live)
    except BadSpec as e:
        report(patch, body, {}, conditions.degraded("InvalidSpec", str(e)), memo)
        return
    except NotYet as e:
        report(patch, body, {}, conditions.progressing("Waiting", str(e)), memo)
        return
    except Superseded:
        return
    report(patch, body, result.status, result.verdict, memo)


async def topology_deleted(body: Any, patch: kopf.Patch, memo: Any, declared_topics: kopf.Index[Any, Any],
                           declared_channels: kopf.Index[Any, Any], **_: Any) -> None:
    rt = runtime_of(memo, _)
    body = snapshot(body)
    try:
        await delete_topology(rt, body, _declared(body, declared_topics, declared_channels))
    except BadSpec:
        return  # it never reached any nsqd under a valid name
    except Refused as e:
        report(patch, body, {}, conditions.degraded("DeletionRefused", str(e)), memo)
        raise kopf.TemporaryError(str(e), delay=rt.intervals.retry) from None
    except NotYet as e:
        raise kopf.TemporaryError(str(e), delay=rt.intervals.retry) from None
