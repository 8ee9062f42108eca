"""Status writes: only what changed, and a field a pass stops reporting is removed rather
than left at its last value (a merge patch keeps what it does not mention)."""
from __future__ import annotations

import kopf

from nsq_operator.handlers.status_patch import write_status
from nsq_operator.status import conditions
from tests.operator.emulator import merge_patch as apply_merge_patch


def written(status: dict, new_nsqd: dict) -> tuple[dict, dict]:
    body = {"metadata": {"generation": 2}, "status": status}
    patch = kopf.Patch()
    write_status(patch, body, {"nsqd": new_nsqd}, conditions.ready("ok"))
    return dict(patch.get("status") or {}), apply_merge_patch(status, dict(patch.get("status") or {}))


def test_a_field_no_longer_reported_is_removed_and_other_writers_fields_stay() -> None:
    before = {"nsqd": {"replicas": 1, "readyReplicas": 1, "registeredInAllLookupds": True},
              "rollout": {"phase": "Complete"}}
    patch, after = written(before, {"replicas": 1, "readyReplicas": 0})
    assert patch["nsqd"] == {"readyReplicas": 0, "registeredInAllLookupds": None}
    assert after["nsqd"] == {"replicas": 1, "readyReplicas": 0}
    assert after["rollout"] == {"phase": "Complete"}


def test_nothing_is_written_when_nothing_changed() -> None:
    nsqd = {"replicas": 2, "readyReplicas": 2, "registeredInAllLookupds": True}
    _, once = written({"nsqd": nsqd}, nsqd)
    patch, _ = written(once, nsqd)
    assert patch == {}
