"""Operator activities: settings at start-up, one login shared by kopf and the operator's
own Kubernetes client, and closing its connections at exit."""
from __future__ import annotations

import logging
from typing import Any

import kopf

from ..constants import FINALIZER, GROUP, MANAGED_BY, MANAGED_BY_LABEL
from ..runtime import runtime_of

WATCH_SILENCE_MARGIN = 60.0  # past the watch's own timeout, for the apiserver's slowness in ending it


def login(memo: Any, **kwargs: Any) -> kopf.ConnectionInfo | None:
    """Read the credentials afresh each time kopf asks: kopf asks again when the apiserver
    refused the ones it had (a rotated service-account token), and the same ones again
    would stop the operator."""
    return runtime_of(memo).log_in(**kwargs)


def configure(settings: kopf.OperatorSettings, memo: Any, **_: Any) -> None:
    settings.persistence.finalizer = FINALIZER
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=GROUP)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(prefix=GROUP, key="last-handled-configuration")
    # Events are posted by the operator itself, on transitions (status.transitions) and
    # roll steps; kopf's log lines are not, or every retry of a waiting handler is one
    settings.posting.level = logging.WARNING
    settings.posting.loggers = False
    # pods are watched (gate, index) with a server-side selector: the cluster's other pods
    # never reach the operator
    for resource in (("v1", "pods"), ("apps", "v1", "statefulsets")):
        settings.watching.label_selectors[resource] = f"{MANAGED_BY_LABEL}={MANAGED_BY}"
    # kopf takes a watch that brings nothing for 70 s for dead and opens it again, counting
    # on a bookmark a minute; the apiserver sends none while no object of the watched kind
    # (anywhere: NsqClusters, StatefulSets) has changed since the watch began, so an idle
    # operator reopened its watches (5 kinds in each namespace) every 70 s, often with a
    # LIST after each. The apiserver ends each watch at this timeout instead, and silence
    # past it means a dead connection.
    watch = runtime_of(memo).intervals.watch
    settings.watching.server_timeout = watch
    settings.watching.inactivity_timeout = watch + WATCH_SILENCE_MARGIN
    # a deleted object waits for its periodic pass to finish; look again soon, not in a minute
    settings.background.cancellation_polling = 1.0


async def cleanup(memo: Any, **_: Any) -> None:
    await runtime_of(memo).close()
