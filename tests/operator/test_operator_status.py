"""Status that tells the truth: the change handler returns once the objects are applied
(waiting for pods is no error to retry), a container that cannot run, a pod no node takes
and a pod the API server refuses make the cluster Degraded with a reason naming it, and
Events mark the transitions, not every pass or retry."""
from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from tests.operator.harness import FAST, OperatorUnderTest
from tests.operator.rolling import events

pytestmark = pytest.mark.asyncio(loop_scope="module")


async def degraded(operator: OperatorUnderTest, name: str, reason: str, timeout: float = 40) -> dict[str, Any]:
    async def probe() -> dict[str, Any] | None:
        c = await operator.condition("NsqCluster", name, "Degraded")
        return c if c and c["status"] == "True" and c["reason"] == reason else None
    found: dict[str, Any] = await operator.until(probe, timeout, f"{name} Degraded {reason}")
    return found


async def warnings(operator: OperatorUnderTest, name: str) -> list[dict[str, Any]]:
    return [e for e in await events(operator, name) if e["type"] == "Warning"]


async def test_a_crash_looping_image_is_degraded_with_one_event_not_one_per_retry(operator: OperatorUnderTest) -> None:
    await operator.create("NsqCluster", "loop", {"image": "nsq:crashloop", "nsqd": {"replicas": 1},
                                                 "lookupd": {"replicas": 1}})
    condition = await degraded(operator, "loop", "CrashLoopBackOff")
    assert "loop-lookupd-0 cannot run: CrashLoopBackOff" in condition["message"]
    ready = await operator.condition("NsqCluster", "loop", "Ready")
    assert ready is not None and ready["status"] == "False"
    # several status passes and handler retries later, still the one Warning of the transition
    began = time.monotonic()
    while time.monotonic() - began < 8 * FAST.retry:
        await asyncio.sleep(FAST.retry)  # a polling period: watching that nothing more is posted
    said = await warnings(operator, "loop")
    assert [e["reason"] for e in said] == ["CrashLoopBackOff"], said

    # a good image: the pods are replaced (the roller takes crash-looping outdated pods first),
    # and the recovery and readiness are announced once each
    await operator.patch("NsqCluster", "loop", {"spec": {"image": "nsq:1", "drainTimeoutSeconds": 2}})
    await operator.ready("NsqCluster", "loop", timeout=60)
    normal = [e["reason"] for e in await events(operator, "loop") if e["type"] == "Normal"]
    assert normal.count("Recovered") == 1 and normal.count("Ready") == 1, normal


async def test_a_pod_no_node_takes_is_degraded_after_the_deadline(operator: OperatorUnderTest) -> None:
    await operator.create("NsqCluster", "nowhere", {"nsqd": {"replicas": 1}, "lookupd": {"replicas": 1},
                                                    "scheduling": {"nodeSelector": {"pool": "queues"}}})
    condition = await degraded(operator, "nowhere", "Unschedulable")
    assert "nowhere-lookupd-0 found no node" in condition["message"]
    assert "didn't match Pod's node affinity/selector" in condition["message"]
    assert [e["reason"] for e in await warnings(operator, "nowhere")] == ["Unschedulable"]


async def test_a_write_the_apiserver_refuses_is_degraded_naming_it_until_the_spec_is_fixed(
        operator: OperatorUnderTest) -> None:
    await operator.create("NsqCluster", "refused", {"nsqd": {"replicas": 1}, "lookupd": {"replicas": 1}})
    await operator.ready("NsqCluster", "refused", timeout=60)
    # an override the operator merges as asked, into a StatefulSet Kubernetes' schema refuses (int64 field)
    await operator.patch("NsqCluster", "refused",
                         {"spec": {"nsqd": {"podTemplate": {"spec": {"terminationGracePeriodSeconds": "forever"}}}}})
    condition = await degraded(operator, "refused", "WriteRefused")
    assert "the API server refuses StatefulSet refused-nsqd" in condition["message"], condition
    assert "terminationGracePeriodSeconds" in condition["message"], condition
    ready = await operator.condition("NsqCluster", "refused", "Ready")
    assert ready is not None and ready["status"] == "False"
    refusals = operator.backstage.take_rejections()
    assert refusals and all(r["path"].endswith("/statefulsets/refused-nsqd") for r in refusals), refusals

    await operator.patch("NsqCluster", "refused", {"spec": {"nsqd": {"podTemplate": None}}})

    await operator.ready("NsqCluster", "refused", timeout=40)
    assert (await operator.condition("NsqCluster", "refused", "Degraded") or {}).get("status") == "False"
    operator.backstage.take_rejections()  # passes that began before the fix may still have sent the refused one
    assert [e["reason"] for e in await warnings(operator, "refused")] == ["WriteRefused"]
    assert [e["reason"] for e in await events(operator, "refused") if e["reason"] == "Recovered"] == ["Recovered"]
    await operator.delete("NsqCluster", "refused")
