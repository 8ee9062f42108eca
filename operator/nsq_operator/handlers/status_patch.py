"""Writing a pass's outcome into an object's status: one snapshot per pass, and only the
fields that changed."""
from __future__ import annotations

import copy
from typing import Any

import kopf

from ..status import conditions
from ..status.errors import BadSpec


def write_status(patch: kopf.Patch, body: Any, status: dict[str, Any], verdict: conditions.Verdict) -> None:
    """Patch the status only where it changed: every write wakes every watcher."""
    generation = body["metadata"].get("generation")
    current = dict(body.get("status") or {})
    wanted = {**status, "observedGeneration": generation,
              "conditions": conditions.conditions_for(list(current.get("conditions") or []), verdict, generation)}
    for key, value in wanted.items():
        if current.get(key) != value:
            patch.status[key] = value


def degraded(patch: kopf.Patch, body: Any, error: BadSpec) -> None:
    write_status(patch, body, {}, conditions.degraded("InvalidSpec", str(error)))


def snapshot(body: Any) -> dict[str, Any]:
    """kopf's body is a live view that moves on as events arrive; a pass must see one
    version throughout, or it reports a newer generation for work done on an older spec."""
    return copy.deepcopy(dict(body))

