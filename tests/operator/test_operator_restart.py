"""The operator keeps its state in the objects, so a new operator process picks up where
a stopped one left: changes made while no operator ran are acted on at start."""
from __future__ import annotations

from pathlib import Path

import pytest

from nsq_operator.constants import EMPTY_REQUEST_ANNOTATION
from tests.operator.harness import Backstage, OperatorUnderTest

NAMESPACE = "nsq-restart"


@pytest.mark.asyncio
async def test_a_restarted_operator_resumes(tmp_path: Path) -> None:
    backstage = Backstage(tmp_path, NAMESPACE).start()
    try:
        first = OperatorUnderTest(backstage, NAMESPACE)
        await first.start()
        try:
            await first.create("NsqCluster", "solo", {"nsqd": {"replicas": 1}, "lookupd": {"replicas": 1}})
            await first.create("NsqChannel", "work", {"cluster": "solo", "topic": "jobs"})
            await first.ready("NsqCluster", "solo", timeout=40)
            await first.ready("NsqChannel", "work")
            for i in range(4):
                assert first.pod_call("solo-nsqd-0", "POST", "/pub?topic=jobs", b"job")[0] == 200
        finally:
            await first.stop()

        # while no operator runs: pause the channel and ask for it to be emptied
        second = OperatorUnderTest(backstage, NAMESPACE)
        await second.patch("NsqChannel", "work", {"spec": {"paused": True},
                                                  "metadata": {"annotations": {EMPTY_REQUEST_ANNOTATION: "now"}}})
        assert second.channel_on("solo-nsqd-0", "jobs", "work")["depth"] == 4

        await second.start()
        try:
            async def caught_up() -> bool:
                channel = second.channel_on("solo-nsqd-0", "jobs", "work") or {}
                return channel.get("paused") is True and channel.get("depth") == 0
            await second.until(caught_up, 30, "paused and emptied by the new operator")
            obj = await second.ready("NsqChannel", "work")
            assert obj["status"]["emptiedRequest"] == "now"
            await second.ready("NsqCluster", "solo")
        finally:
            await second.stop()
    finally:
        backstage.stop()
