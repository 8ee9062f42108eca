"""The roller replaces pods through the eviction API, so the PodDisruptionBudget (one nsqd
down at a time) holds against a `kubectl drain` running at the same time: neither the
drain can take a second nsqd while the roller drains one, nor the roller a second while
another is down. The emulator serves pods/eviction with the budget's arithmetic."""
from __future__ import annotations

from typing import Any

import pytest

from tests.broker.wire import WireConn
from tests.operator.harness import OperatorUnderTest
from tests.operator.rolling import freeze, pod, publish, rolled, rollout, thaw

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.slow]  # timing of the roller, once per CI run


async def kubectl_evict(operator: OperatorUnderTest, name: str) -> tuple[int, str]:
    eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": operator.namespace}}
    async with operator.session.post(f"{operator.api}/api/v1/namespaces/{operator.namespace}/pods/{name}/eviction",
                                     json=eviction) as r:
        return r.status, await r.text()


def is_ready(found: dict[str, Any] | None) -> bool:
    return bool(found) and any(c["type"] == "Ready" and c["status"] == "True" for c in found["status"]["conditions"])


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

        async def unready(name: str) -> bool:
            return not is_ready(await pod(operator, name))
        await operator.until(lambda: unready("budget-nsqd-1"), 30, "budget-nsqd-1 not Ready (draining)")

        # a `kubectl drain` of the other node now: the budget refuses it
        status, text = await kubectl_evict(operator, "budget-nsqd-0")
        assert status == 429 and "disruption budget" in text
        assert not ((await pod(operator, "budget-nsqd-0")) or {})["metadata"].get("deletionTimestamp")

        # the other nsqd goes down for another reason; then the drain finishes
        freeze(operator, "budget-nsqd-0")
        try:
            await operator.until(lambda: unready("budget-nsqd-0"), 30, "budget-nsqd-0 not Ready")
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
