"""A bigger nsqd disk on an apiserver that behaves like a real one: a StorageClass that
does not allow expansion answers the claim's resize with 403, and the cluster says so
(StorageResizeFailed, in the apiserver's words) while the rest of the pass goes on; a
StatefulSet deleted with its pods orphaned stays Terminating until the garbage collector
has released them, and is made anew only then, with as many replicas as nsqds run, even
in the middle of a scale-down."""
from __future__ import annotations

from typing import Any

import pytest

from tests.operator.addresses import write_book
from tests.operator.harness import OperatorUnderTest
from tests.operator.rolling import bodies, consume_all, events, pod, publish, scaled_to, statefulset_replicas
from tests.servers import free_port

pytestmark = pytest.mark.asyncio(loop_scope="module")
NS = "nsq-test"
STATEFULSETS = f"/apis/apps/v1/namespaces/{NS}/statefulsets"
CLAIMS = f"/api/v1/namespaces/{NS}/persistentvolumeclaims"
CLASSES = "/apis/storage.k8s.io/v1/storageclasses"


def claim_size(obj: dict[str, Any]) -> str:
    return str(obj["spec"]["resources"]["requests"]["storage"])


async def degraded(operator: OperatorUnderTest, cluster: str, reason: str) -> dict[str, Any] | None:
    condition = await operator.condition("NsqCluster", cluster, "Degraded")
    return condition if condition and condition["status"] == "True" and condition["reason"] == reason else None


async def test_a_claim_its_class_cannot_expand_is_reported_and_the_pass_goes_on(operator: OperatorUnderTest) -> None:
    status, answer = await operator.attempt("POST", operator.api + CLASSES, {
        "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "fixed"},
        "provisioner": "example.com/fixed", "allowVolumeExpansion": False})
    assert status == 201 or status == 200, answer
    await operator.create("NsqCluster", "fixed", {
        "nsqd": {"replicas": 1, "storage": {"size": "1Gi", "storageClassName": "fixed"}},
        "lookupd": {"replicas": 1}, "drainTimeoutSeconds": 2})
    await operator.ready("NsqCluster", "fixed", timeout=60)
    before = await operator.core(f"{STATEFULSETS}/fixed-nsqd")

    # the admin Deployment comes after nsqd's StatefulSet in a pass: it shows the pass went on
    await operator.patch("NsqCluster", "fixed", {"spec": {"nsqd": {"storage": {"size": "2Gi"}},
                                                          "admin": {"replicas": 2}}})
    condition = await operator.until(lambda: degraded(operator, "fixed", "StorageResizeFailed"), 30,
                                     "fixed Degraded StorageResizeFailed")
    assert "data-fixed-nsqd-0" in condition["message"] and "must support resize" in condition["message"]
    assert "spec.nsqd.storage.size 2Gi" in condition["message"]

    async def admin_scaled() -> bool:
        deployment = await operator.core(f"/apis/apps/v1/namespaces/{NS}/deployments/fixed-nsqadmin")
        return bool(deployment and deployment["spec"]["replicas"] == 2)
    await operator.until(admin_scaled, 20, "the rest of the pass applied")
    sts = await operator.core(f"{STATEFULSETS}/fixed-nsqd")
    assert sts["metadata"]["uid"] == before["metadata"]["uid"]  # kept until its claims can grow
    assert claim_size(sts["spec"]["volumeClaimTemplates"][0]) == "1Gi"
    assert claim_size(await operator.core(f"{CLAIMS}/data-fixed-nsqd-0")) == "1Gi"
    assert len(await events(operator, "fixed", "StorageResizeFailed")) == 1  # the transition, not every pass

    # the class is changed to allow it: the next pass grows the disk
    async with operator.session.patch(operator.api + f"{CLASSES}/fixed", json={"allowVolumeExpansion": True},
                                      headers={"Content-Type": "application/merge-patch+json"}) as r:
        assert r.status == 200, await r.text()

    async def grown() -> bool:
        sts = await operator.core(f"{STATEFULSETS}/fixed-nsqd")
        return bool(sts and sts["metadata"]["uid"] != before["metadata"]["uid"]
                    and claim_size(sts["spec"]["volumeClaimTemplates"][0]) == "2Gi")
    await operator.until(grown, 40, "fixed-nsqd made anew with 2Gi claims")
    assert claim_size(await operator.core(f"{CLAIMS}/data-fixed-nsqd-0")) == "2Gi"
    await operator.ready("NsqCluster", "fixed", timeout=60)
    await operator.delete("NsqCluster", "fixed")


async def test_storage_grows_in_the_middle_of_a_scale_down_and_the_leaving_nsqd_stays(
        operator: OperatorUnderTest) -> None:
    await operator.create("NsqCluster", "midway", {"nsqd": {"replicas": 2, "storage": {"size": "1Gi"}},
                                                   "lookupd": {"replicas": 1}, "drainTimeoutSeconds": 2})
    await operator.create("NsqChannel", "midway-work", {"cluster": "midway", "topic": "jobs", "channelName": "work"})
    await operator.ready("NsqCluster", "midway", timeout=60)
    await operator.ready("NsqChannel", "midway-work")
    publish(operator, "midway-nsqd-1", "jobs", bodies("midway-nsqd-1", 30))
    leaving = await pod(operator, "midway-nsqd-1")
    assert leaving is not None
    before = await operator.core(f"{STATEFULSETS}/midway-nsqd")
    book = operator.pods.pods()
    cut = {**book, "midway-nsqd-0": {**book["midway-nsqd-0"], "http_port": free_port()}}
    write_book(operator.backstage.root, cut)  # the handoff cannot reach the nsqd that stays: it waits
    try:
        await operator.patch("NsqCluster", "midway", {"spec": {"nsqd": {"replicas": 1}}})
        await operator.until(lambda: degraded(operator, "midway", "RolloutBlocked"), 60, "the scale-down stopped")
        assert await statefulset_replicas(operator, "midway-nsqd") == 2

        await operator.patch("NsqCluster", "midway", {"spec": {"nsqd": {"storage": {"size": "2Gi"}}}})

        async def remade() -> dict[str, Any] | None:
            sts = await operator.core(f"{STATEFULSETS}/midway-nsqd")
            if not sts or sts["metadata"]["uid"] == before["metadata"]["uid"]:
                return None
            return sts
        sts = await operator.until(remade, 40, "midway-nsqd made anew")
        assert sts["metadata"].get("generation") == 1 and sts["spec"]["replicas"] == 2  # as made: both nsqds kept
        assert claim_size(sts["spec"]["volumeClaimTemplates"][0]) == "2Gi"

        async def adopted() -> bool:
            found = await pod(operator, "midway-nsqd-1")
            assert found is not None and found["metadata"]["uid"] == leaving["metadata"]["uid"], "deleted"
            return [r["uid"] for r in found["metadata"].get("ownerReferences", [])] == [sts["metadata"]["uid"]]
        await operator.until(adopted, 30, "the leaving nsqd adopted, not deleted")
        assert await events(operator, "midway", "StorageExpanded")
    finally:
        write_book(operator.backstage.root, book)

    await scaled_to(operator, "midway", 1)
    assert set(bodies("midway-nsqd-1", 30)) <= set(consume_all(operator, "midway-nsqd-0", "jobs", "work"))
    assert claim_size(await operator.core(f"{CLAIMS}/data-midway-nsqd-0")) == "2Gi"
    await operator.delete("NsqCluster", "midway")
