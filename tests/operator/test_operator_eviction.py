"""The roller replaces pods through the eviction API, so the PodDisruptionBudget (one nsqd
down at a time) holds against a `kubectl drain` running at the same time: neither the
drain can take a second nsqd while the roller drains one, nor the roller a second while
another is down. The emulator serves pods/eviction with the budget's arithmetic."""
from __future__ import annotations

from typing import Any

import pytest

from tests.broker.wire import WireConn
from tests.operator.harness import OperatorUnderTest
from tests.operator.rolling import (bodies, consume_all, events, freeze, pod, publish, rolled, rollout, scaled_to,
                                    statefulset_replicas, thaw)

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.slow]  # timing of the roller, once per CI run


async def kubectl_evict(operator: OperatorUnderTest, name: str) -> tuple[int, str]:
    eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": operator.namespace}}
    async with operator.session.post(f"{operator.api}/api/v1/namespaces/{operator.namespace}/pods/{name}/eviction",
                                     json=eviction) as r:
        return r.status, await r.text()


def is_ready(found: dict[str, Any] | None) -> bool:
    return bool(found) and any(c["type"] == "Ready" and c["status"] == "True" for c in found["status"]["conditions"])


async def unready(name: str, operator: OperatorUnderTest) -> bool:
    return not is_ready(await pod(operator, name))


async def test_the_budget_holds_between_the_roller_and_a_concurrent_drain(operator: OperatorUnderTest) -> None:
    await operator.create("NsqCluster", "budget", {"drainTimeoutSeconds": 30, "nsqd": {"replicas": 2},
                                                   "lookupd": {"replicas": 1}})
    await operator.ready("NsqCluster", "budget", timeout=60)
    publish(operator, "budget-nsqd-1", "jobs", [b"held"])
    tcp = operator.pods.tcp("budget-nsqd-1")
    assert tcp is not None
    with WireConn(tcp) as consumer:
        consumer.sub("jobs", "work")
        consumer.expect_ok()
        consumer.rdy(1)
        message = consumer.read_message()
        await operator.patch("NsqCluster", "budget", {"spec": {"nsqd": {"options": {"max-rdy-count": 12}}}})

        async def draining() -> bool:
            state = await rollout(operator, "budget")
            return state.get("phase") == "Draining" and state.get("pod") == "budget-nsqd-1"
        await operator.until(draining, 60, "budget-nsqd-1 draining")

        await operator.until(lambda: unready("budget-nsqd-1", operator), 30, "budget-nsqd-1 not Ready (draining)")

        # a `kubectl drain` of the other node now: the budget refuses it
        status, text = await kubectl_evict(operator, "budget-nsqd-0")
        assert status == 429 and "disruption budget" in text
        assert not ((await pod(operator, "budget-nsqd-0")) or {})["metadata"].get("deletionTimestamp")

        # the other nsqd goes down for another reason; then the drain finishes
        freeze(operator, "budget-nsqd-0")
        try:
            await operator.until(lambda: unready("budget-nsqd-0", operator), 30, "budget-nsqd-0 not Ready")
            consumer.fin(message.id)

            async def held_back() -> dict[str, Any] | None:
                state = await rollout(operator, "budget")
                return state if "waits for the disruption budget" in state.get("message", "") else None
            state = await operator.until(held_back, 30, "the roller held back by the budget")
            assert state["phase"] == "Draining" and state["message"].startswith("budget-nsqd-1 drained;")
            assert not ((await pod(operator, "budget-nsqd-1")) or {}).get("metadata", {}).get("deletionTimestamp")
        finally:
            thaw(operator, "budget-nsqd-0")
    await rolled(operator, "budget", ["budget-nsqd-1", "budget-nsqd-0"])


async def test_a_scale_down_evicts_the_leaving_nsqd_only_once_the_budget_allows(operator: OperatorUnderTest) -> None:
    """The leaving nsqd hands its messages off, then goes through the eviction API before
    the StatefulSet loses its place: while another nsqd is down the budget refuses, and
    the pod and the replicas stay as they are until it is back."""
    await operator.create("NsqCluster", "leave", {"drainTimeoutSeconds": 30, "lookupd": {"replicas": 1},
                                                  "nsqd": {"replicas": 3, "storage": {"whenScaled": "Delete"}}})
    await operator.ready("NsqCluster", "leave", timeout=90)
    published = bodies("leave-nsqd-2", 20)
    publish(operator, "leave-nsqd-2", "jobs", published)
    tcp = operator.pods.tcp("leave-nsqd-2")
    assert tcp is not None
    with WireConn(tcp) as consumer:  # holds one message, so the handoff waits for it
        consumer.sub("jobs", "work")
        consumer.expect_ok()
        consumer.rdy(1)
        held = consumer.read_message()
        await operator.patch("NsqCluster", "leave", {"spec": {"nsqd": {"replicas": 2}}})

        async def handing_off() -> bool:
            state = await rollout(operator, "leave")
            return state.get("phase") == "HandingOff" and state.get("pod") == "leave-nsqd-2"
        await operator.until(handing_off, 60, "leave-nsqd-2 handing off")
        await operator.until(lambda: unready("leave-nsqd-2", operator), 30, "leave-nsqd-2 not Ready (handing off)")

        freeze(operator, "leave-nsqd-1")  # another nsqd goes down; its share of the handoff fails over
        try:
            await operator.until(lambda: unready("leave-nsqd-1", operator), 30, "leave-nsqd-1 not Ready")
            consumer.fin(held.id)

            async def held_back() -> dict[str, Any] | None:
                state = await rollout(operator, "leave")
                return state if "eviction waits for the disruption budget" in state.get("message", "") else None
            state = await operator.until(held_back, 40, "the eviction of leave-nsqd-2 held back by the budget")
            assert state["phase"] == "HandingOff" and "leave-nsqd-2 handed all its messages off" in state["message"]
            assert await statefulset_replicas(operator, "leave-nsqd") == 3
            assert not ((await pod(operator, "leave-nsqd-2")) or {}).get("metadata", {}).get("deletionTimestamp")
        finally:
            thaw(operator, "leave-nsqd-1")

    await scaled_to(operator, "leave", 2)
    received = consume_all(operator, "leave-nsqd-0", "jobs", "work") + \
        consume_all(operator, "leave-nsqd-1", "jobs", "work")
    assert set(received) | {held.body} == set(published)  # 0 lost
    assert await operator.core(f"/api/v1/namespaces/{operator.namespace}/persistentvolumeclaims/"
                               f"data-leave-nsqd-2") is None
    assert any("leave-nsqd-2 handed all its messages off; evicted" in e["message"]
               for e in await events(operator, "leave", "ScaleDown"))
