"""NsqCluster handlers: thin wrappers around reconcile.cluster."""
from __future__ import annotations

from typing import Any

import kopf

from ..reconcile.cluster import reconcile_cluster
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


def _declared(body: Any, index: Any) -> list[Any]:
    return list(index.get((body["metadata"]["namespace"], body["metadata"]["name"]), []))


async def cluster_changed(body: kopf.Body, patch: kopf.Patch, memo: Any, declared_topics: kopf.Index[Any, Any],
                          declared_channels: kopf.Index[Any, Any], **_: Any) -> None:
    """create / update / resume: apply, then wait (with backoff) until ready."""
    rt = runtime_of(memo)
    try:
        result = await reconcile_cluster(rt, body, _declared(body, declared_topics), _declared(body, declared_channels))
    except BadSpec as e:
        _degraded(patch, body, e)
        raise kopf.PermanentError(f"invalid spec: {e}") from None
    _write(patch, body, result.status, result.verdict)
    if not result.verdict.ready:
        raise kopf.TemporaryError(result.verdict.message, delay=rt.intervals.retry)


async def cluster_tick(body: kopf.Body, patch: kopf.Patch, memo: Any, declared_topics: kopf.Index[Any, Any],
                       declared_channels: kopf.Index[Any, Any], **_: Any) -> None:
    """Periodic: status, gates of new nsqds, the lookupd list of nsqds that started since,
    and drift of the owned objects."""
    try:
        result = await reconcile_cluster(runtime_of(memo), body, _declared(body, declared_topics),
                                         _declared(body, declared_channels))
    except BadSpec as e:
        _degraded(patch, body, e)
        return
    _write(patch, body, result.status, result.verdict)
