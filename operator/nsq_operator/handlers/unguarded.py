"""Timers that put no finalizer on the objects they run for.

kopf puts its finalizer on every object a timer matches, so that it can stop the timer
before the object goes. Nothing of the operator's needs that: the periodic passes only
read and report, an object deleted mid-pass loses a status write it no longer needs. A
finalizer that guards nothing leaves the object Terminating for ever once the operator is
gone (`helm uninstall` removes the operator before the kinds helm does not know). kopf
takes the finalizer off objects that carry one from before, as no handler requires it.

Without a finalizer, kopf stops an object's timers only on the watch event of its deletion,
and none comes when the watch went first (a watched namespace deleted: its RoleBinding goes
with it). So a timer whose pass meets a 403 reads its own object afresh, once a pass: if
that answers 403 or 404 (or names another object since), the object is gone for the
operator; the pass ends there, writing nothing, the timer stops with one INFO record and
the object's memo drops what the operator kept in it. Should the object show up again on
the watch (access given back), kopf starts its timers anew.

A pass's status is written by the operator's own client before the pass ends, not left in
kopf's patch: kopf 1.45 applies a timer's patch outside the handler, and a refused write
there (a 409 once the apiserver's own retries under contention ran out, a 5xx longer than
kopf's retries) ends the timer's task for good: the object's status would say what it said
last until the operator restarts. Refused here, it fails the pass, which kopf retries after
its backoff, and the next pass writes the status it finds then."""
from __future__ import annotations

import dataclasses
from typing import Any, Callable

import kopf

from ..kube.client import ON_FORBIDDEN, KubeApiError
from ..runtime import runtime_of
from .status_patch import ANNOUNCED

Fn = Callable[..., Any]


class Gone(Exception):
    """The timer's own object is gone for the operator (deleted, or no longer readable)."""


async def ensure_there(memo: Any, body: Any) -> None:
    """Raises Gone when the object, read afresh, answers 404 or 403 or has another uid."""
    meta = body["metadata"]
    try:
        fresh = await runtime_of(memo).kube.get(body["kind"], meta["namespace"], meta["name"])
    except KubeApiError as e:
        if e.status in (403, 404):
            raise Gone(f"reading it answers {e.status}: {e.said}") from None
        raise
    if fresh is None:
        raise Gone("reading it answers 404")
    if fresh["metadata"].get("uid") != meta.get("uid"):
        raise Gone("another object of its name took its place")


async def send_status(memo: Any, body: Any, patch: kopf.Patch) -> None:
    """The status the pass put in kopf's patch, sent now; the patch is left empty for kopf,
    whether the write is accepted or not."""
    status = patch.pop("status", None)
    if not status:
        return
    meta = body["metadata"]
    await runtime_of(memo).kube.patch(body["kind"], meta["namespace"], meta["name"], {"status": status}, "status")


def _until_gone(fn: Fn, id_: str) -> Fn:
    async def guarded(*, body: Any, memo: Any, patch: kopf.Patch, stopped: kopf.DaemonStopped,
                      logger: Any, **kwargs: Any) -> Any:
        asked = False

        async def on_forbidden() -> None:
            nonlocal asked
            if not asked:  # once a pass; the read's own 403 comes back here, answered already
                asked = True
                await ensure_there(memo, body)

        token = ON_FORBIDDEN.set(on_forbidden)
        try:
            try:
                result = await fn(body=body, memo=memo, patch=patch, stopped=stopped, logger=logger, **kwargs)
            except Gone:
                raise
            except Exception:
                await send_status(memo, body, patch)  # a failed pass's status is written all the same
                raise
            await send_status(memo, body, patch)
            return result
        except Gone as e:
            patch.clear()  # nothing of the pass is written
            memo.pop(ANNOUNCED, None)
            meta = body["metadata"]
            logger.info(f"Timer {id_!r} stops: {body['kind']} {meta['namespace']}/{meta['name']} is gone "
                        f"for the operator ({e})")
            stopped._setter.set(kopf.DaemonStoppingReason.RESOURCE_DELETED)  # kopf 1.45: the waiter's setter
            return None
        finally:
            ON_FORBIDDEN.reset(token)
    return guarded


def timer(registry: kopf.OperatorRegistry, *resource: str, **options: Any) -> Callable[[Fn], Fn]:
    """``kopf.timer(*resource, registry=registry, **options)`` without the finalizer."""
    def decorator(fn: Fn) -> Fn:
        kopf.timer(*resource, registry=registry, **options)(_until_gone(fn, str(options.get("id", fn.__name__))))
        spawning = registry._spawning._handlers  # kopf 1.45's list of timers and daemons
        spawning[-1] = dataclasses.replace(spawning[-1], requires_finalizer=False)
        return fn
    return decorator
