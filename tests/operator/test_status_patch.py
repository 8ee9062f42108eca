"""Status writes: only what changed, and a field a pass stops reporting is removed rather
than left at its last value (a merge patch keeps what it does not mention)."""
from __future__ import annotations

import kopf

from nsq_operator.handlers.status_patch import announce, write_status
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


def test_two_passes_seeing_the_same_transition_announce_it_once() -> None:
    """The change handler and the periodic pass start from the same status (Ready); both
    find the cluster degraded. The Warning is posted once; a later recovery once more."""
    body = {"metadata": {"generation": 3},
            "status": {"conditions": conditions.conditions_for([], conditions.ready("ok"), 3)}}
    memo: dict = {}
    said = []
    for _ in range(2):
        written = write_status(kopf.Patch(), body, {}, conditions.degraded("WriteRefused", "no"))
        said += [a.reason for a in announce(memo, body, written)]
    assert said == ["WriteRefused"]
    recovered = {**body, "status": {"conditions": written}}
    for _ in range(2):
        written = write_status(kopf.Patch(), recovered, {}, conditions.ready("ok"))
        said += [a.reason for a in announce(memo, recovered, written)]
    assert said == ["WriteRefused", "Recovered", "Ready"]


def test_without_a_memory_the_status_read_is_what_was_said_last() -> None:
    """After a restart of the operator: a condition already in the status is not announced again."""
    body = {"metadata": {"generation": 1},
            "status": {"conditions": conditions.conditions_for([], conditions.degraded("CrashLoopBackOff", "x"), 1)}}
    written = write_status(kopf.Patch(), body, {}, conditions.degraded("CrashLoopBackOff", "x"))
    assert announce({}, body, written) == []
