"""Scale-down of nsqd under kopf against the emulator and real processes: each leaving
pod hands its backlog to the nsqds that stay before the StatefulSet loses it (0 lost:
every message body is read back), its claim goes per storage.whenScaled, and a handoff
that fails stops the scale-down Degraded, with the pod and its messages kept, until a
retry succeeds."""
from __future__ import annotations

from typing import Any

import pytest

from tests.operator.addresses import write_book
from tests.operator.harness import OperatorUnderTest
from tests.operator.rolling import bodies, consume_all, events, pod, publish, scaled_to, statefulset_replicas
from tests.servers import free_port

pytestmark = pytest.mark.asyncio(loop_scope="module")
NS = "nsq-test"


async def test_scale_down_hands_the_backlog_off_and_deletes_the_claim(operator: OperatorUnderTest) -> None:
    await operator.create("NsqCluster", "shrink", {"nsqd": {"replicas": 3, "storage": {"whenScaled": "Delete"}},
                                                   "lookupd": {"replicas": 1}, "drainTimeoutSeconds": 2})
    await operator.create("NsqChannel", "shrink-work", {"cluster": "shrink", "topic": "jobs", "channelName": "work"})
    await operator.ready("NsqCluster", "shrink", timeout=60)
    await operator.ready("NsqChannel", "shrink-work")
    published = []
    for i in range(3):
        published += bodies(f"shrink-nsqd-{i}", 40)
        publish(operator, f"shrink-nsqd-{i}", "jobs", bodies(f"shrink-nsqd-{i}", 40))
    assert await operator.core(f"/api/v1/namespaces/{NS}/persistentvolumeclaims/data-shrink-nsqd-2") is not None

    await operator.patch("NsqCluster", "shrink", {"spec": {"nsqd": {"replicas": 2}}})

    await scaled_to(operator, "shrink", 2)
    received = consume_all(operator, "shrink-nsqd-0", "jobs", "work") + \
        consume_all(operator, "shrink-nsqd-1", "jobs", "work")
    assert sorted(set(received)) == sorted(published)  # 0 lost (a handoff may duplicate, never drop)
    assert await operator.core(f"/api/v1/namespaces/{NS}/persistentvolumeclaims/data-shrink-nsqd-2") is None

    async def volume_gone() -> bool:  # the kubelet removes it on its next pass after the claim
        return not (operator.backstage.root / "shrink-nsqd-2" / "data").exists()
    await operator.until(volume_gone, 10, "the deleted claim's volume removed")
    messages = [e["message"] for e in await events(operator, "shrink", "ScaleDown")]
    assert any("handing the messages of shrink-nsqd-2 off" in m for m in messages)
    assert any("shrink-nsqd-2 handed all its messages off" in m for m in messages)


async def test_a_failed_handoff_stops_the_scale_down_until_a_retry_succeeds(operator: OperatorUnderTest) -> None:
    # runs after the test above, on the same 2-nsqd cluster
    publish(operator, "shrink-nsqd-1", "jobs", bodies("late", 25))
    book = operator.pods.pods()
    cut = {**book, "shrink-nsqd-0": {**book["shrink-nsqd-0"], "http_port": free_port()}}
    write_book(operator.backstage.root, cut)  # the operator now hands off to an address nobody answers
    try:
        await operator.patch("NsqCluster", "shrink", {"spec": {"nsqd": {"replicas": 1}}})

        async def degraded() -> Any:
            c = await operator.condition("NsqCluster", "shrink", "Degraded")
            return c if c and c["status"] == "True" else None
        condition = await operator.until(degraded, 60, "shrink Degraded")
        assert condition["reason"] == "RolloutBlocked"
        assert "scale-down of shrink-nsqd-1 would strand 25 messages" in condition["message"]
        assert await statefulset_replicas(operator, "shrink-nsqd") == 2
        assert await pod(operator, "shrink-nsqd-1") is not None
        assert await events(operator, "shrink", "RolloutBlocked")
    finally:
        write_book(operator.backstage.root, book)

    await scaled_to(operator, "shrink", 1)
    received = consume_all(operator, "shrink-nsqd-0", "jobs", "work")
    assert set(bodies("late", 25)) <= set(received)
    assert (await operator.condition("NsqCluster", "shrink", "Degraded") or {}).get("status") == "False"


async def test_a_handoff_begun_before_the_operator_recorded_it_is_carried_on(operator: OperatorUnderTest) -> None:
    # runs after the test above, on the same cluster, now 1 nsqd: back to 2 first
    await operator.patch("NsqCluster", "shrink", {"spec": {"nsqd": {"replicas": 2}}})
    await operator.ready("NsqCluster", "shrink", timeout=90)
    publish(operator, "shrink-nsqd-1", "jobs", bodies("orphan", 15))
    # the leaving nsqd is already handing off, as after an operator restart between its
    # POST /drain and the status write: unready from then on, and its phase unrecorded
    entry = operator.pods.pods()["shrink-nsqd-0"]
    target = f"{entry['host']}:{entry['http_port']}"
    status, answer = operator.pod_call("shrink-nsqd-1", "POST", f"/drain?handoff={target}")
    assert status == 200, answer

    await operator.patch("NsqCluster", "shrink", {"spec": {"nsqd": {"replicas": 1}}})

    await scaled_to(operator, "shrink", 1)
    assert set(bodies("orphan", 15)) <= set(consume_all(operator, "shrink-nsqd-0", "jobs", "work"))
