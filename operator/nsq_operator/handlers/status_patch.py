"""Writing a pass's outcome into an object's status: one snapshot per pass, and only the
fields that changed."""
from __future__ import annotations

import copy
from typing import Any, MutableMapping

import kopf

from ..constants import PAUSED_ANNOTATION
from ..status import conditions
from ..status.errors import BadSpec
from ..status.transitions import Announcement, transitions


PAUSED_REASON = "Paused"
ANNOUNCED = "announced_conditions"  # the per-object memo's key for the conditions last announced


def merge_patch(current: Any, wanted: Any) -> Any:
    """The RFC 7386 patch turning ``current`` into ``wanted``: objects merge, so a field the
    pass no longer reports (unknown now) goes as null, or its last value would stay."""
    if not (isinstance(current, dict) and isinstance(wanted, dict)):
        return wanted
    changes = {key: merge_patch(current.get(key), value) for key, value in wanted.items() if current.get(key) != value}
    return {**changes, **{key: None for key in current if key not in wanted}}


def write_status(patch: kopf.Patch, body: Any, status: dict[str, Any],
                 verdict: conditions.Verdict) -> list[dict[str, Any]]:
    """Patch the status only where it changed: every write wakes every watcher. Top-level
    fields this pass does not report (another writer's, such as the roller's) are left alone.
    Returns the conditions written."""
    generation = body["metadata"].get("generation")
    current = dict(body.get("status") or {})
    before = list(current.get("conditions") or [])
    wanted = {**status, "observedGeneration": generation,
              "conditions": conditions.conditions_for(before, verdict, generation)}
    for key, value in wanted.items():
        if current.get(key) != value:
            patch.status[key] = merge_patch(current.get(key), value)
    return list(wanted["conditions"])


def announce(memo: MutableMapping[str, Any], body: Any, written: list[dict[str, Any]]) -> list[Announcement]:
    """The Events of a change of conditions, once per change. The change handler and the
    periodic pass can both start from the same status (neither's write has landed yet) and
    both see the same transition; the object's memo (kopf keeps one per object, shared by
    all its handlers, and none survives a restart) holds the conditions last announced, so
    the second pass finds nothing new. Without a memo entry, the status as read is what was
    said last."""
    said_last = memo.get(ANNOUNCED)
    if said_last is None:
        said_last = list((body.get("status") or {}).get("conditions") or [])
    memo[ANNOUNCED] = written
    return transitions(said_last, written)


def report(patch: kopf.Patch, body: Any, status: dict[str, Any], verdict: conditions.Verdict,
           memo: MutableMapping[str, Any]) -> None:
    """write_status, and the Events of the transition posted through kopf."""
    for said in announce(memo, body, write_status(patch, body, status, verdict)):
        kopf.event(body, type=said.type, reason=said.reason, message=said.message)


def paused(patch: kopf.Patch, body: Any) -> None:
    """Say that nothing is reconciled: Progressing False, reason Paused, stamped with the
    generation seen; Ready and Degraded keep what they last said."""
    generation = body["metadata"].get("generation")
    current = list((body.get("status") or {}).get("conditions") or [])
    wanted = conditions.set_condition(current, "Progressing", "False", PAUSED_REASON,
                                      f"reconciliation is paused by the {PAUSED_ANNOTATION} annotation", generation)
    if wanted != current:
        patch.status["conditions"] = wanted


def degraded(patch: kopf.Patch, body: Any, error: BadSpec, memo: MutableMapping[str, Any]) -> None:
    report(patch, body, {}, conditions.degraded("InvalidSpec", str(error)), memo)


def snapshot(body: Any) -> dict[str, Any]:
    """kopf's body is a live view that moves on as events arrive; a pass must see one
    version throughout, or it reports a newer generation for work done on an older spec."""
    return copy.deepcopy(dict(body))

