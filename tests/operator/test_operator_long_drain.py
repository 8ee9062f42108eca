"""A draining nsqd is judged by its drain, not by how long it has been unready: a drain
longer than the roller's ready timeout runs to its end before the pod is deleted, and a
drain that is cut short (the nsqd dies) is never reported as drained."""
from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from tests.broker.wire import WireConn
from tests.operator.harness import FAST, OperatorUnderTest
from tests.operator.rolling import depth, events, nsqd_log, pod, publish, rolled, rollout, signal_pod

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.slow]  # timing of the roller, once per CI run
SIGKILL = 9
# longer than the roller's ready timeout plus its drain margin: the old roller gave up on it
DRAIN_SECONDS = int(FAST.ready_timeout + FAST.drain_margin + 6)


async def draining(operator: OperatorUnderTest, cluster: str, name: str) -> None:
    async def began() -> bool:
        state = await rollout(operator, cluster)
        return state.get("phase") == "Draining" and state.get("pod") == name
    await operator.until(began, 60, f"{name} draining")


async def test_a_drain_longer_than_the_ready_timeout_runs_to_its_end(operator: OperatorUnderTest) -> None:
    await operator.create("NsqCluster", "slow", {"drainTimeoutSeconds": DRAIN_SECONDS, "nsqd": {"replicas": 1},
                                                 "lookupd": {"replicas": 1}})
    await operator.ready("NsqCluster", "slow", timeout=60)
    publish(operator, "slow-nsqd-0", "jobs", [b"held"])
    tcp = operator.pods.tcp("slow-nsqd-0")
    assert tcp is not None
    with WireConn(tcp) as consumer:
        consumer.sub("jobs", "work")
        consumer.expect_ok()
        consumer.rdy(1)
        message = consumer.read_message()
        await operator.patch("NsqCluster", "slow", {"spec": {"nsqd": {"options": {"max-rdy-count": 11}}}})
        await draining(operator, "slow", "slow-nsqd-0")
        began = time.monotonic()
        # past the ready timeout and the margin, the pod is still draining and not deleted
        while time.monotonic() - began < FAST.ready_timeout + FAST.drain_margin + 2:
            found = await pod(operator, "slow-nsqd-0")
            assert found is not None and not found["metadata"].get("deletionTimestamp"), "deleted mid-drain"
            state = await rollout(operator, "slow")
            assert state.get("phase") == "Draining" and not state.get("error"), state
            await asyncio.sleep(0.2)  # a polling period: this loop watches for something that must not happen
        consumer.fin(message.id)  # the consumer finishes: the drain is over, nothing was requeued
        await rolled(operator, "slow", ["slow-nsqd-0"])
    assert "DRAIN: done" in nsqd_log(operator, "slow-nsqd-0")
    assert depth(operator, "slow-nsqd-0", "jobs", "work") == 0
    said = [e["message"] for e in await events(operator, "slow")]
    assert any(m.startswith("slow-nsqd-0 drained and deleted") for m in said), said
    assert not any("stopped before" in m for m in said), said


async def test_a_drain_cut_short_is_not_reported_as_drained(operator: OperatorUnderTest) -> None:
    await operator.create("NsqCluster", "cut", {"drainTimeoutSeconds": DRAIN_SECONDS, "nsqd": {"replicas": 1},
                                                "lookupd": {"replicas": 1}})
    await operator.ready("NsqCluster", "cut", timeout=60)
    publish(operator, "cut-nsqd-0", "jobs", [b"held"])
    tcp = operator.pods.tcp("cut-nsqd-0")
    assert tcp is not None
    with WireConn(tcp) as consumer:
        consumer.sub("jobs", "work")
        consumer.expect_ok()
        consumer.rdy(1)
        consumer.read_message()
        await operator.patch("NsqCluster", "cut", {"spec": {"nsqd": {"options": {"max-rdy-count": 11}}}})
        await draining(operator, "cut", "cut-nsqd-0")
        signal_pod(operator, "cut-nsqd-0", SIGKILL)  # dies mid-drain

        async def replacing() -> dict[str, Any] | None:
            state = await rollout(operator, "cut")
            return state if state.get("phase") in ("Replacing", "Complete") and state.get("since") else None
        await operator.until(replacing, 30, "cut-nsqd-0 deleted")
    await rolled(operator, "cut", ["cut-nsqd-0"])
    said = [(e["type"], e["message"]) for e in await events(operator, "cut")]
    assert ("Warning", "cut-nsqd-0 stopped before its drain finished (nsqd exited with 137) and deleted") in said, said
    assert not any("cut-nsqd-0 drained" in m for _, m in said), said
