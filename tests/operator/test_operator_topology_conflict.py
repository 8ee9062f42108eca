"""One owner per NSQ name: two NsqTopics naming one topic of a cluster, one paused and one
not, no longer flip it on every pass; the older is applied, the other says Conflict naming
it, and takes over once the older is gone."""
from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from tests.operator.harness import FAST, OperatorUnderTest

pytestmark = pytest.mark.asyncio(loop_scope="module")


async def test_the_oldest_declaration_of_a_topic_wins(operator: OperatorUnderTest) -> None:
    await operator.create("NsqCluster", "owners", {"nsqd": {"replicas": 1}, "lookupd": {"replicas": 1}})
    await operator.ready("NsqCluster", "owners", timeout=60)
    await operator.create("NsqTopic", "first", {"cluster": "owners", "topicName": "shared", "paused": True})
    await operator.ready("NsqTopic", "first")
    await operator.create("NsqTopic", "second", {"cluster": "owners", "topicName": "shared", "paused": False})

    async def conflict() -> dict[str, Any] | None:
        c = await operator.condition("NsqTopic", "second", "Ready")
        return c if c and c["status"] == "False" and c["reason"] == "Conflict" else None
    condition = await operator.until(conflict, 30, "second in Conflict")
    assert "NsqTopic first declares topic shared of NsqCluster owners" in condition["message"]
    # several drift passes of both objects later, the topic is still as the older one says
    began = time.monotonic()
    while time.monotonic() - began < 4 * FAST.topology:
        topic = operator.topic_on("owners-nsqd-0", "shared")
        assert topic is not None and topic["paused"] is True, topic
        await asyncio.sleep(0.2)  # a polling period: watching for a flip that must not happen
    assert (await operator.condition("NsqTopic", "first", "Ready") or {}).get("status") == "True"

    await operator.delete("NsqTopic", "first")  # Retain: the topic stays, and changes hands
    await operator.ready("NsqTopic", "second")

    async def unpaused() -> bool:
        topic = operator.topic_on("owners-nsqd-0", "shared")
        return topic is not None and topic["paused"] is False
    await operator.until(unpaused, 30, "the topic unpaused by its new owner")
