"""Scale-down with the default claim policy (storage.whenScaled: Retain), under kopf
against the emulator and real processes: the leaving nsqd still hands its messages off,
but its PersistentVolumeClaim, and the directory behind it, stay after the pod is gone.
(test_operator_scale_down.py covers whenScaled: Delete.)"""
from __future__ import annotations

import pytest

from tests.operator.harness import OperatorUnderTest
from tests.operator.rolling import bodies, consume_all, publish, scaled_to

NS = "nsq-test"
pytestmark = pytest.mark.asyncio(loop_scope="module")


async def test_scale_down_keeps_the_claim_of_the_leaving_pod_by_default(operator: OperatorUnderTest) -> None:
    await operator.create("NsqCluster", "keep", {"nsqd": {"replicas": 2}, "lookupd": {"replicas": 1},
                                                 "drainTimeoutSeconds": 2})
    await operator.create("NsqChannel", "keep-work", {"cluster": "keep", "topic": "jobs", "channelName": "work"})
    await operator.ready("NsqCluster", "keep", timeout=60)
    await operator.ready("NsqChannel", "keep-work")
    sts = await operator.core(f"/apis/apps/v1/namespaces/{NS}/statefulsets/keep-nsqd")
    assert sts["spec"]["persistentVolumeClaimRetentionPolicy"]["whenScaled"] == "Retain"
    published = bodies("keep-nsqd-1", 20)
    publish(operator, "keep-nsqd-1", "jobs", published)
    claim = f"/api/v1/namespaces/{NS}/persistentvolumeclaims/data-keep-nsqd-1"
    assert await operator.core(claim) is not None

    await operator.patch("NsqCluster", "keep", {"spec": {"nsqd": {"replicas": 1}}})

    await scaled_to(operator, "keep", 1)
    assert set(consume_all(operator, "keep-nsqd-0", "jobs", "work")) == set(published)
    assert await operator.core(claim) is not None, "whenScaled: Retain keeps the claim"
    assert (operator.backstage.root / "keep-nsqd-1" / "data").is_dir()
