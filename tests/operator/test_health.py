"""What degrades a cluster, decided from objects alone: refused writes, containers that
cannot run, pods no node takes past the deadline; and which changes of condition get an
Event."""
from __future__ import annotations

import datetime
import json
from typing import Any

from nsq_operator.kube.client import KubeApiError
from nsq_operator.reconcile.cluster import apply_all
from nsq_operator.reconcile.health import pod_problems
from nsq_operator.runtime import Runtime
from nsq_operator.status.transitions import transitions
from tests.operator.samples import cluster

AT = datetime.datetime(2026, 1, 1, 12, 0, 0, tzinfo=datetime.timezone.utc)


class RefusingApi:
    """Takes every object but StatefulSets, which it refuses as the API server does (422)."""

    def __init__(self) -> None:
        self.created: list[str] = []

    async def get(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        return None

    async def list(self, kind: str, namespace: str, labels: dict[str, str] | None = None) -> list[dict[str, Any]]:
        return []

    async def apply(self, manifest: dict[str, Any]) -> dict[str, Any]:
        if manifest["kind"] == "StatefulSet":
            status = {"kind": "Status", "code": 422, "reason": "Invalid",
                      "message": f'StatefulSet.apps "{manifest["metadata"]["name"]}" is invalid: spec.template: bad'}
            raise KubeApiError(422, "PATCH", "/apis/apps/v1/...", json.dumps(status))
        self.created.append(manifest["metadata"]["name"])
        return manifest


async def test_a_refused_write_is_a_problem_and_the_other_writes_still_go_through() -> None:
    rt = Runtime()
    rt._kube = RefusingApi()  # type: ignore[assignment]
    problems = await apply_all(rt, cluster(), {})
    assert [p.reason for p in problems] == ["WriteRefused", "WriteRefused"]
    assert problems[0].message == ('the API server refuses StatefulSet demo-lookupd: StatefulSet.apps "demo-lookupd" '
                                   'is invalid: spec.template: bad')
    assert "demo-nsqd-headless" in rt._kube.created  # type: ignore[attr-defined]


def pod(name: str, waiting: str | None = None, unschedulable_since: str | None = None,
        terminating: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if terminating:
        meta["deletionTimestamp"] = "2026-01-01T11:59:00Z"
    status: dict[str, Any] = {"conditions": [], "containerStatuses": []}
    if waiting:
        status["containerStatuses"].append({"name": "nsqd", "state": {"waiting": {"reason": waiting, "message": "m"}}})
    if unschedulable_since:
        status["conditions"].append({"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                     "lastTransitionTime": unschedulable_since, "message": "no node"})
    return {"metadata": meta, "status": status}


def test_pod_problems() -> None:
    pods = [pod("a", waiting="ImagePullBackOff"), pod("b", waiting="ContainerCreating"),
            pod("c", unschedulable_since="2026-01-01T11:58:00Z"), pod("d", unschedulable_since="2026-01-01T11:59:50Z"),
            pod("e", waiting="CrashLoopBackOff", terminating=True), pod("f", waiting="CrashLoopBackOff")]
    found = pod_problems(pods, AT, unschedulable_after=60, spared="f")
    assert [(p.reason, p.message) for p in found] == [
        ("ImagePullBackOff", "a cannot run: ImagePullBackOff (m)"),
        ("Unschedulable", "c found no node for 120s: no node")]


def cond(type_: str, status: str, reason: str = "R") -> dict[str, Any]:
    return {"type": type_, "status": status, "reason": reason, "message": f"{type_} {reason}"}


def test_events_mark_transitions_only() -> None:
    waiting = [cond("Ready", "False"), cond("Degraded", "False")]
    crashing = [cond("Ready", "False"), cond("Degraded", "True", "CrashLoopBackOff")]
    refused = [cond("Ready", "False"), cond("Degraded", "True", "FailedCreate")]
    ready = [cond("Ready", "True", "Reconciled"), cond("Degraded", "False")]
    assert transitions(waiting, waiting) == [] and transitions(crashing, crashing) == []
    assert [(a.type, a.reason) for a in transitions(waiting, crashing)] == [("Warning", "CrashLoopBackOff")]
    assert [(a.type, a.reason) for a in transitions(crashing, refused)] == [("Warning", "FailedCreate")]
    assert [(a.type, a.reason) for a in transitions(refused, ready)] == [("Normal", "Recovered"), ("Normal", "Ready")]
    assert [(a.type, a.reason) for a in transitions([], ready)] == [("Normal", "Ready")]


class StatefulSetApi:
    """The nsqd StatefulSet exists at resourceVersion 41 with 5 replicas; the rest is missing.
    ``conflicts``: how many of its applies its controller's status writes beat (409), each
    moving it one version on."""

    def __init__(self, conflicts: int = 0) -> None:
        self.applied: list[dict[str, Any]] = []
        self.conflicts = conflicts
        self.version = 41

    async def get(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        if (kind, name) == ("StatefulSet", "demo-nsqd"):
            return {"metadata": {"name": name, "resourceVersion": str(self.version)}, "spec": {"replicas": 5}}
        return None

    async def list(self, kind: str, namespace: str, labels: dict[str, str] | None = None) -> list[dict[str, Any]]:
        return []

    async def apply(self, manifest: dict[str, Any]) -> dict[str, Any]:
        if manifest["metadata"].get("resourceVersion") is not None and self.conflicts:
            self.conflicts -= 1
            self.version += 1
            raise KubeApiError(409, "PATCH", "/apis/apps/v1/...", json.dumps({"message": "the object has been modified"}))
        self.applied.append(manifest)
        return manifest


async def test_replicas_are_written_with_the_resource_version_they_were_read_at() -> None:
    rt = Runtime()
    rt._kube = StatefulSetApi()  # type: ignore[assignment]
    assert await apply_all(rt, cluster(nsqd={"replicas": 3}), {}) == []
    (nsqd,) = [m for m in rt._kube.applied  # type: ignore[attr-defined]
               if (m["kind"], m["metadata"]["name"]) == ("StatefulSet", "demo-nsqd")]
    assert nsqd["metadata"]["resourceVersion"] == "41" and nsqd["spec"]["replicas"] == 5  # the roller lowers it


async def test_a_status_write_between_read_and_apply_is_tried_again_on_a_fresh_read() -> None:
    rt = Runtime()
    rt._kube = StatefulSetApi(conflicts=2)  # type: ignore[assignment]
    assert await apply_all(rt, cluster(nsqd={"replicas": 3}), {}) == []
    (nsqd,) = [m for m in rt._kube.applied  # type: ignore[attr-defined]
               if (m["kind"], m["metadata"]["name"]) == ("StatefulSet", "demo-nsqd")]
    assert nsqd["metadata"]["resourceVersion"] == "43" and nsqd["spec"]["replicas"] == 5


async def test_a_write_that_keeps_conflicting_is_no_success() -> None:
    import pytest

    from nsq_operator.reconcile.cluster import Conflicted
    rt = Runtime()
    rt._kube = StatefulSetApi(conflicts=10)  # type: ignore[assignment]
    with pytest.raises(Conflicted):
        await apply_all(rt, cluster(nsqd={"replicas": 3}), {})


class OrphansApi(StatefulSetApi):
    """No nsqd StatefulSet (deleted with its pods orphaned, to be made anew), and its pods:
    demo-nsqd-0 and -1 running, -2 on its way out."""

    async def get(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        return None

    async def list(self, kind: str, namespace: str, labels: dict[str, str] | None = None) -> list[dict[str, Any]]:
        if kind != "Pod":
            return []
        return [{"metadata": {"name": "demo-nsqd-0"}}, {"metadata": {"name": "demo-nsqd-1"}},
                {"metadata": {"name": "demo-nsqd-2", "deletionTimestamp": "2026-01-01T11:59:00Z"}}]


async def test_a_statefulset_made_anew_keeps_the_nsqds_that_run() -> None:
    """In the middle of a scale-down from 2 to 1, the leaving nsqd has yet to hand its
    messages off: made with the spec's replicas, its StatefulSet would delete it at once."""
    rt = Runtime()
    rt._kube = OrphansApi()  # type: ignore[assignment]
    assert await apply_all(rt, cluster(nsqd={"replicas": 1}), {}) == []
    (nsqd,) = [m for m in rt._kube.applied  # type: ignore[attr-defined]
               if (m["kind"], m["metadata"]["name"]) == ("StatefulSet", "demo-nsqd")]
    assert nsqd["spec"]["replicas"] == 2 and "resourceVersion" not in nsqd["metadata"]
