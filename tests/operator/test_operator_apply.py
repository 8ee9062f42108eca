"""The operator applies its objects server-side: what a user takes out of the spec goes
from the objects, what another manager put on them stays, and a change the apiserver
cannot make is reported instead of dropped."""
from __future__ import annotations

import asyncio
from typing import Any

import pytest

from nsq_operator.constants import RESTART_ANNOTATION
from tests.operator.harness import OperatorUnderTest
from tests.operator.rolling import events, rolled

pytestmark = pytest.mark.asyncio(loop_scope="module")
NS = "nsq-test"
STATEFULSETS = f"/apis/apps/v1/namespaces/{NS}/statefulsets"
SERVICES = f"/api/v1/namespaces/{NS}/services"
SCHEDULING = {"nodeSelector": {"disk": "ssd"}, "priorityClassName": "queues",
              "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "nsq", "effect": "NoSchedule"}]}


async def edit(operator: OperatorUnderTest, path: str, patch: dict[str, Any], manager: str) -> None:
    async with operator.session.patch(operator.api + path, json=patch, params={"fieldManager": manager},
                                      headers={"Content-Type": "application/merge-patch+json"}) as r:
        assert r.status == 200, await r.text()


async def test_removed_fields_go_and_other_managers_fields_stay(operator: OperatorUnderTest) -> None:
    await operator.create("NsqCluster", "rm", {"nsqd": {"replicas": 0}, "lookupd": {"replicas": 1},
                                               "scheduling": SCHEDULING, "imagePullSecrets": ["registry"]})

    async def template() -> dict[str, Any] | None:
        sts = await operator.core(f"{STATEFULSETS}/rm-nsqd")
        return sts["spec"]["template"]["spec"] if sts else None
    pod = await operator.until(template, 30, "rm-nsqd built")
    assert pod["nodeSelector"] == {"disk": "ssd"} and pod["imagePullSecrets"] == [{"name": "registry"}]
    # others' marks: kubectl annotate on the StatefulSet, a label by another controller on a Service
    await edit(operator, f"{STATEFULSETS}/rm-nsqd", {"metadata": {"annotations": {"team": "messaging"}}},
               "kubectl-annotate")
    await edit(operator, f"{SERVICES}/rm-nsqd", {"metadata": {"labels": {"mesh": "on"}}}, "mesh-controller")

    await operator.patch("NsqCluster", "rm", {"spec": {"scheduling": None, "imagePullSecrets": None}})

    async def cleared() -> bool:
        spec = await template()
        assert spec is not None
        return not ({"nodeSelector", "priorityClassName", "tolerations", "imagePullSecrets"} & set(spec))
    await operator.until(cleared, 30, "scheduling and pull secrets gone from the pod template")
    sts = await operator.core(f"{STATEFULSETS}/rm-nsqd")
    assert sts["metadata"]["annotations"] == {"team": "messaging"}
    assert (await operator.core(f"{SERVICES}/rm-nsqd"))["metadata"]["labels"]["mesh"] == "on"
    managers = {(m["manager"], m["operation"]) for m in sts["metadata"]["managedFields"]}
    assert ("nsq-operator", "Apply") in managers and ("kubectl-annotate", "Update") in managers
    await operator.delete("NsqCluster", "rm")


async def test_a_roll_goes_on_when_no_event_can_be_posted(operator: OperatorUnderTest) -> None:
    await operator.create("NsqCluster", "mute", {"nsqd": {"replicas": 1}, "lookupd": {"replicas": 1},
                                                 "drainTimeoutSeconds": 2})
    await operator.ready("NsqCluster", "mute", timeout=60)
    operator.backstage.forbid_creating("events")  # as if RBAC or an admission webhook said no
    try:
        await operator.patch("NsqCluster", "mute", {"metadata": {"annotations": {RESTART_ANNOTATION: "now"}}})
        await rolled(operator, "mute", ["mute-lookupd-0", "mute-nsqd-0"])
        assert await events(operator, "mute", "ManualRestart") == []
    finally:
        operator.backstage.forbid_creating()
    await operator.delete("NsqCluster", "mute")


async def test_a_rotated_token_is_followed(operator: OperatorUnderTest) -> None:
    await operator.create("NsqCluster", "rot", {"nsqd": {"replicas": 0}, "lookupd": {"replicas": 1}})
    await operator.ready("NsqCluster", "rot", timeout=40)
    old = operator.backstage.token()
    operator.backstage.rotate_token("token-rotated")  # as the kubelet does to a bound token
    status, _ = await operator.attempt_as(old, "GET", operator._path("NsqCluster", "rot"))
    assert status == 401
    # the operator's own apply and kopf's status patch both need the new token
    await operator.patch("NsqCluster", "rot", {"spec": {"nsqd": {"options": {"max-rdy-count": 99}}}})
    await operator.ready("NsqCluster", "rot", timeout=40)
    config = await operator.core(f"/api/v1/namespaces/{NS}/configmaps/rot-nsq-config")
    assert "max_rdy_count = 99" in config["data"]["nsqd.conf"]
    await operator.delete("NsqCluster", "rot")


CLAIMS = f"/api/v1/namespaces/{NS}/persistentvolumeclaims"
PODS = f"/api/v1/namespaces/{NS}/pods"


def claim_size(obj: dict[str, Any]) -> str:
    return str(obj["spec"]["resources"]["requests"]["storage"])


async def test_storage_grows_in_place_and_cannot_shrink_or_change_class(operator: OperatorUnderTest) -> None:
    await operator.create("NsqCluster", "disk", {"nsqd": {"replicas": 1, "storage": {"size": "1Gi"}},
                                                 "lookupd": {"replicas": 1}, "drainTimeoutSeconds": 2})
    await operator.ready("NsqCluster", "disk", timeout=60)
    before = await operator.core(f"{STATEFULSETS}/disk-nsqd")
    pod_uid = (await operator.core(f"{PODS}/disk-nsqd-0"))["metadata"]["uid"]
    started = operator.pod_json("disk-nsqd-0", "/stats?format=json")["start_time"]

    await operator.patch("NsqCluster", "disk", {"spec": {"nsqd": {"storage": {"size": "2Gi"}}}})

    async def remade() -> dict[str, Any] | None:
        sts = await operator.core(f"{STATEFULSETS}/disk-nsqd")
        if not sts or sts["metadata"]["uid"] == before["metadata"]["uid"]:
            return None
        return sts if claim_size(sts["spec"]["volumeClaimTemplates"][0]) == "2Gi" else None
    sts = await operator.until(remade, 40, "disk-nsqd made anew with 2Gi claims")
    assert claim_size(await operator.core(f"{CLAIMS}/data-disk-nsqd-0")) == "2Gi"

    async def adopted() -> bool:
        pod = await operator.core(f"{PODS}/disk-nsqd-0")
        return [r["uid"] for r in pod["metadata"].get("ownerReferences", [])] == [sts["metadata"]["uid"]]
    await operator.until(adopted, 60, "the running nsqd adopted by the new StatefulSet")
    assert (await operator.core(f"{PODS}/disk-nsqd-0"))["metadata"]["uid"] == pod_uid
    assert operator.pod_json("disk-nsqd-0", "/stats?format=json")["start_time"] == started  # never restarted
    await operator.ready("NsqCluster", "disk", timeout=40)
    assert await events(operator, "disk", "StorageExpanded")

    await operator.patch("NsqCluster", "disk", {"spec": {"nsqd": {"replicas": 2}}})
    await operator.ready("NsqCluster", "disk", timeout=60)
    assert claim_size(await operator.core(f"{CLAIMS}/data-disk-nsqd-1")) == "2Gi"  # a new nsqd gets the new size

    await operator.patch("NsqCluster", "disk", {"spec": {"nsqd": {"storage": {"size": "1Gi"}}}})

    async def refused() -> dict[str, Any] | None:
        condition = await operator.condition("NsqCluster", "disk", "Degraded")
        return condition if condition and condition["status"] == "True" else None
    condition = await operator.until(refused, 30, "a smaller size refused")
    assert condition["reason"] == "ChangeNotApplied" and "spec.nsqd.storage.size" in condition["message"]
    assert len(await events(operator, "disk", "ChangeNotApplied")) == 1
    assert claim_size((await operator.core(f"{STATEFULSETS}/disk-nsqd"))["spec"]["volumeClaimTemplates"][0]) == "2Gi"

    status, answer = await operator.attempt("PATCH", operator._path("NsqCluster", "disk"),
                                            {"spec": {"nsqd": {"storage": {"storageClassName": "fast"}}}},
                                            "application/merge-patch+json")
    assert status == 422 and "storageClassName cannot change" in answer["message"], answer
    assert len(operator.backstage.take_rejections()) == 1
    await operator.delete("NsqCluster", "disk")


async def test_quantities_the_apiserver_rewrites_canonical_are_no_change(operator: OperatorUnderTest) -> None:
    """The apiserver stores 1.5Gi as 1536Mi and 1024Mi as 1Gi: read back, they are the same
    sizes, not a change of the claim template to report on every pass."""
    await operator.create("NsqCluster", "canon", {
        "nsqd": {"replicas": 1, "storage": {"size": "1.5Gi"}, "resources": {"requests": {"memory": "1024Mi"}}},
        "lookupd": {"replicas": 1}, "drainTimeoutSeconds": 2})
    await operator.ready("NsqCluster", "canon", timeout=60)
    sts = await operator.core(f"{STATEFULSETS}/canon-nsqd")
    assert claim_size(sts["spec"]["volumeClaimTemplates"][0]) == "1536Mi"  # as a real apiserver keeps it
    nsqd = next(c for c in sts["spec"]["template"]["spec"]["containers"] if c["name"] == "nsqd")
    assert nsqd["resources"]["requests"]["memory"] == "1Gi"
    for _ in range(3):  # a few periodic passes (1 s apart)
        await asyncio.sleep(1.2)
        degraded = await operator.condition("NsqCluster", "canon", "Degraded")
        assert degraded is not None and degraded["status"] == "False", degraded
    assert await events(operator, "canon", "ChangeNotApplied") == []
    assert (await operator.core(f"{STATEFULSETS}/canon-nsqd"))["spec"] == sts["spec"]
    assert claim_size(await operator.core(f"{CLAIMS}/data-canon-nsqd-0")) == "1536Mi"
    await operator.delete("NsqCluster", "canon")


async def test_a_status_write_racing_the_apply_is_retried_and_the_pruning_still_runs(
        operator: OperatorUnderTest) -> None:
    """The StatefulSet controller rewrites status (and so resourceVersion) whenever a pod
    changes: the change handler's write meets it (409) and must try again, not call the
    change done, or the NetworkPolicy the spec dropped would never be deleted."""
    policies = f"/apis/networking.k8s.io/v1/namespaces/{NS}/networkpolicies"
    await operator.create("NsqCluster", "race", {"nsqd": {"replicas": 1}, "lookupd": {"replicas": 1},
                                                 "networkPolicy": {"enabled": True}, "drainTimeoutSeconds": 2})
    await operator.ready("NsqCluster", "race", timeout=60)
    assert await operator.core(f"{policies}/race-nsqd") is not None
    operator.backstage.race_status("race-nsqd")
    await operator.patch("NsqCluster", "race", {"spec": {"networkPolicy": {"enabled": False},
                                                         "nsqd": {"options": {"max-rdy-count": 77}}}})

    async def pruned() -> bool:
        return await operator.core(f"{policies}/race-nsqd") is None
    await operator.until(pruned, 20, "the NetworkPolicy the spec dropped deleted")
    assert not operator.backstage.root.joinpath("status-race").read_text().strip()  # the race did happen
    await operator.ready("NsqCluster", "race", timeout=60)
    await operator.delete("NsqCluster", "race")
