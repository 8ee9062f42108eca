"""NsqCluster handlers: thin wrappers around reconcile.cluster."""
from __future__ import annotations

import copy
from typing import Any

import kopf

from ..reconcile.cluster import reconcile_cluster
from ..reconcile.freshness import Superseded
from ..runtime import runtime_of
from ..status import conditions
from ..topology.wishes import BadSpec


def _write(patch: kopf.Patch, body: Any, status: dict[str, Any], verdict: conditions.Verdict) -> None:
    """Patch the status only where it changed: every write wakes every watcher."""
    generation = body["metadata"].get("generation")
    current = dict(body.get("status") or {})
    wanted = {**status, "observedGeneration": generation,
              "conditions": conditions.conditions_for(list(current.get("conditions") or []), verdict, generation)}
    for key, value in wanted.items():
        if current.get(key) != value:
            patch.status[key] = value


def _degraded(patch: kopf.Patch, body: Any, error: BadSpec) -> None:
    _write(patch, body, {}, conditions.degraded("InvalidSpec", str(error)))


def snapshot(body: Any) -> dict[str, Any]:
    """kopf's body is a live view that moves on as events arrive; a pass must see one
    version throughout, or it reports a newer generation for work done on an older spec."""
    return copy.deepcopy(dict(body))


def _declared(body: Any, index: Any) -> list[Any]:
    return list(index.get((body["metadata"]["namespace"], body["metadata"]["name"]), []))


async def cluster_changed(body: Any, patch: kopf.Patch, memo: Any, declared_topics: kopf.Index[Any, Any],
                          declared_channels: kopf.Index[Any, Any], **_: Any) -> None:
    """create / update / resume: apply, then wait (with backoff) until ready."""
    rt = runtime_of(memo)
    body = snapshot(body)
    try:
        result = await reconcile_cluster(rt, body, _declared(body, declared_topics), _declared(body, declared_channels))
    except BadSpec as e:
        _degraded(patch, body, e)
        raise kopf.PermanentError(f"invalid spec: {e}") from None
    except Superseded as e:
        raise kopf.TemporaryError(str(e), delay=rt.intervals.retry) from None
    _write(patch, body, result.status, result.verdict)
    if not result.verdict.ready:
        raise kopf.TemporaryError(result.verdict.message, delay=rt.intervals.retry)


async def cluster_tick(body: Any, patch: kopf.Patch, memo: Any, declared_topics: kopf.Index[Any, Any],
                       declared_channels: kopf.Index[Any, Any], **_: Any) -> None:
    """Periodic: status, gates of new nsqds, the lookupd list of nsqds that started since,
    and drift of the owned objects."""
    body = snapshot(body)
    try:
        result = await reconcile_cluster(runtime_of(memo), body, _declared(body, declared_topics),
                                         _declared(body, declared_channels))
    except BadSpec as e:
        _degraded(patch, body, e)
        return
    except Superseded:
        return
    _write(patch, body, result.status, result.verdict)
