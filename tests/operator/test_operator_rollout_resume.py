"""The roll's progress lives in status.rollout: an operator stopped in the middle of a
roll and a new one started later finish it without draining a pod twice."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.broker.wire import WireConn
from tests.operator.harness import Backstage, OperatorUnderTest
from tests.operator.rolling import drains, publish, rolled, rollout

NAMESPACE = "nsq-resume"


@pytest.mark.asyncio
async def test_a_new_operator_finishes_the_roll_of_a_stopped_one(tmp_path: Path) -> None:
    backstage = Backstage(tmp_path, NAMESPACE).start()
    try:
        first = OperatorUnderTest(backstage, NAMESPACE)
        await first.start()
        try:
            await first.create("NsqCluster", "resume", {"drainTimeoutSeconds": 3,
                                                        "nsqd": {"replicas": 2}, "lookupd": {"replicas": 1}})
            await first.ready("NsqCluster", "resume", timeout=60)
            publish(first, "resume-nsqd-0", "jobs", [b"held"])
            tcp = first.pods.tcp("resume-nsqd-0")
            assert tcp is not None
            consumer = WireConn(tcp)  # holds a message in flight: resume-nsqd-0's drain takes a while
            consumer.sub("jobs", "work")
            consumer.expect_ok()
            consumer.rdy(1)
            consumer.read_message()

            await first.patch("NsqCluster", "resume", {"spec": {"nsqd": {"options": {"max-rdy-count": 3}}}})

            async def draining_the_second() -> bool:
                state = await rollout(first, "resume")
                return state.get("phase") == "Draining" and state.get("pod") == "resume-nsqd-0"
            await first.until(draining_the_second, 90, "resume-nsqd-0 draining")
            assert (await rollout(first, "resume"))["replaced"] == ["resume-nsqd-1"]
        finally:
            await first.stop()
        consumer.close()
        finished_pid = first.pods.pid("resume-nsqd-1")

        second = OperatorUnderTest(backstage, NAMESPACE)
        await second.start()
        try:
            await rolled(second, "resume", ["resume-nsqd-1", "resume-nsqd-0"])
            assert second.pods.pid("resume-nsqd-1") == finished_pid  # done before the stop: left alone
            assert drains(second, "resume-nsqd-1") == 1 and drains(second, "resume-nsqd-0") == 1
        finally:
            await second.stop()
    finally:
        backstage.stop()
