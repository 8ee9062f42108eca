"""NsqCluster handlers: thin wrappers around reconcile.cluster."""
from __future__ import annotations

from typing import Any

import kopf

from ..models.cluster import is_paused
from ..reconcile.cluster import ClusterPass, Conflicted, reconcile_cluster
from ..reconcile.freshness import Superseded
from ..runtime import runtime_of
from ..status.errors import BadSpec
from .status_patch import degraded, paused, report, snapshot


def _declared(body: Any, index: Any) -> list[Any]:
    return list(index.get((body["metadata"]["namespace"], body["metadata"]["name"]), []))


async def cluster_changed(body: Any, patch: kopf.Patch, memo: Any, declared_topics: kopf.Index[Any, Any],
                          declared_channels: kopf.Index[Any, Any], **_: Any) -> None:
    """create / update / resume: apply and report; the periodic pass reports what follows
    (waiting for pods is not a failure to retry)."""
    rt = runtime_of(memo, _)
    live, body = body, snapshot(body)
    if is_paused(body):
        paused(patch, body)
        return
    try:
        result = await reconcile_cluster(rt, body, _declared(body, declared_topics), _declared(body, declared_channels),
                                         live, prune=True)
    except BadSpec as e:
        degraded(patch, body, e, memo)
        raise kopf.PermanentError(f"invalid spec: {e}") from None
    except Superseded:
        return  # the newer generation has its own pass
    except Conflicted as e:
        # not done: the pass (and the pruning after it) is tried again, on fresh reads
        raise kopf.TemporaryError(str(e), delay=rt.intervals.retry) from None
    report(patch, body, result.status, result.verdict, memo)
    again(rt, result)


def again(rt: Any, result: ClusterPass) -> None:
    """A pass waiting for something that comes soon (a StatefulSet the garbage collector
    is releasing) runs again after the retry delay; its status is written all the same."""
    if result.requeue:
        raise kopf.TemporaryError(result.requeue, delay=rt.intervals.retry)


async def cluster_tick(body: Any, patch: kopf.Patch, memo: Any, declared_topics: kopf.Index[Any, Any],
                       declared_channels: kopf.Index[Any, Any], **_: Any) -> None:
    """Periodic: status, gates of new nsqds, the lookupd list of nsqds that started since,
    and drift of the owned objects."""
    live, body = body, snapshot(body)
    if is_paused(body):
        paused(patch, body)
        return
    rt = runtime_of(memo, _)
    try:
        result = await reconcile_cluster(rt, body, _declared(body, declared_topics),
                                         _declared(body, declared_channels), live)
    except BadSpec as e:
        degraded(patch, body, e, memo)
        return
    except Superseded:
        return
    except Conflicted as e:
        raise kopf.TemporaryError(str(e), delay=rt.intervals.retry) from None
    report(patch, body, result.status, result.verdict, memo)
    again(rt, result)
