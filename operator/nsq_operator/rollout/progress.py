"""status.rollout: reading it, moving it from phase to phase, and what it means for the
cluster's conditions. Pure: the roller and the cluster pass both use it."""
from __future__ import annotations

import datetime
from typing import Any, Mapping

from ..models import RolloutStatus
from ..status import conditions
from ..status.conditions import now

ROLLING_REASON = "RollingUpdate"
BLOCKED_REASON = "RolloutBlocked"


def current(body: Mapping[str, Any]) -> RolloutStatus | None:
    raw = (body.get("status") or {}).get("rollout")
    return RolloutStatus.model_validate(raw) if raw else None


def enter(state: RolloutStatus, phase: str, message: str, **fields: Any) -> RolloutStatus:
    """A new phase: the clock restarts and a past failure is forgotten (it made progress)."""
    return state.model_copy(update={"phase": phase, "message": message, "since": now(), "error": None,
                                    "failures": 0, **fields})


def blocked(state: RolloutStatus, error: str) -> RolloutStatus:
    return state.model_copy(update={"error": error, "failures": state.failures + 1})


def waiting(state: RolloutStatus, message: str) -> RolloutStatus:
    """Held back by a precondition (another pod not Ready yet): not a failure."""
    if state.phase == "Waiting" and state.message == message:
        return state.model_copy(update={"error": None})
    return state.model_copy(update={"phase": "Waiting", "message": message, "since": now(), "error": None,
                                    "pod": None, "reason": None})


def seconds_in_phase(state: RolloutStatus, at: datetime.datetime | None = None) -> float:
    if not state.since:
        return 0.0
    began = datetime.datetime.strptime(state.since, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.timezone.utc)
    return ((at or datetime.datetime.now(datetime.timezone.utc)) - began).total_seconds()


def backoff(failures: int, base: float, limit: float) -> float:
    """Delay before the next attempt after ``failures`` failures in a row: doubling, capped."""
    return float(min(limit, base * 2 ** max(0, failures - 1)))


def active(state: RolloutStatus | None) -> bool:
    return state is not None and state.phase != "Complete"


def verdict(state: RolloutStatus | None, base: conditions.Verdict) -> conditions.Verdict:
    """The cluster's conditions with the roll taken into account: a stopped roll is
    Degraded (naming pod and cause), then whatever degrades the cluster, and a roll under
    way is Progressing."""
    if state is None:
        return base
    if state.error:
        return conditions.degraded(BLOCKED_REASON, state.error)
    if base.degraded:  # a pod that cannot run or be created says more than "rolling"
        return base
    if active(state):
        doing = f"{state.phase} {state.pod}" if state.pod else state.phase
        return conditions.progressing(ROLLING_REASON, f"{doing}: {state.message}; {base.message}")
    return base
