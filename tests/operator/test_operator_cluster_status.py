"""What an NsqCluster's status claims, against real nsqd and nsqlookupd processes:
registration is only claimed for nsqds that are there to register, and the scale
subresource gives `kubectl scale` and autoscalers what they read and write.

KMock's emulator does not serve /scale as Kubernetes does (it merges a Scale patch into
the object itself), so the Scale object is built here the way the API server builds it,
from the paths the generated CRD declares; a wrong path there fails these tests."""
from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.operator.conftest import NAMESPACE
from tests.operator.harness import OperatorUnderTest
from tests.operator.rolling import signal_pod

pytestmark = pytest.mark.asyncio(loop_scope="module")
CRD = Path(__file__).resolve().parents[2] / "crds" / "nsqclusters.nsq.dev.yaml"


def scale_paths() -> dict[str, str]:
    crd = yaml.safe_load(CRD.read_text())
    (version,) = crd["spec"]["versions"]
    return dict(version["subresources"]["scale"])


def at(obj: Any, path: str) -> Any:
    """The value at a CRD scale path such as ``.spec.nsqd.replicas`` (None when absent)."""
    for key in path.lstrip(".").split("."):
        obj = obj.get(key) if isinstance(obj, dict) else None
    return obj


def patch_at(path: str, value: Any) -> dict[str, Any]:
    patch: Any = value
    for key in reversed(path.lstrip(".").split(".")):
        patch = {key: patch}
    return dict(patch)


def scale_of(obj: dict[str, Any]) -> dict[str, Any]:
    """The autoscaling/v1 Scale the API server serves at .../nsqclusters/<name>/scale."""
    paths = scale_paths()
    return {"spec": {"replicas": at(obj, paths["specReplicasPath"])},
            "status": {"replicas": at(obj, paths["statusReplicasPath"]), "selector": at(obj, paths["labelSelectorPath"])}}


async def kubectl_scale(operator: OperatorUnderTest, name: str, replicas: int) -> None:
    """A Scale write, as the API server carries it out: the Scale's spec.replicas lands at
    the CRD's specReplicasPath."""
    await operator.patch("NsqCluster", name, patch_at(scale_paths()["specReplicasPath"], replicas))


async def pods_selected(operator: OperatorUnderTest, selector: str) -> set[str]:
    wanted = dict(term.split("=", 1) for term in selector.split(","))
    pods = (await operator.core(f"/api/v1/namespaces/{NAMESPACE}/pods"))["items"]
    return {p["metadata"]["name"] for p in pods
            if wanted.items() <= (p["metadata"].get("labels") or {}).items() and not p["metadata"].get("deletionTimestamp")}


async def test_registration_is_not_claimed_without_a_ready_nsqd(operator: OperatorUnderTest) -> None:
    await operator.create("NsqCluster", "bare", {"nsqd": {"replicas": 0}, "lookupd": {"replicas": 1}})
    obj = await operator.ready("NsqCluster", "bare", timeout=40)  # nothing asked for is missing
    assert obj["status"]["nsqd"]["readyReplicas"] == 0
    assert "registeredInAllLookupds" not in obj["status"]["nsqd"]

    await operator.create("NsqCluster", "lone", {"nsqd": {"replicas": 1}, "lookupd": {"replicas": 1}})
    obj = await operator.ready("NsqCluster", "lone", timeout=40)
    assert obj["status"]["nsqd"]["registeredInAllLookupds"] is True

    signal_pod(operator, "lone-nsqd-0", signal.SIGKILL)  # the only nsqd dies: nothing is registered any more

    async def unclaimed() -> dict[str, Any] | None:
        status = (await operator.get("NsqCluster", "lone"))["status"]
        return status if status["nsqd"]["readyReplicas"] == 0 and "registeredInAllLookupds" not in status["nsqd"] else None
    status = await operator.until(unclaimed, 40, "lone no longer claims registration")
    ready = next(c for c in status["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "False" and "no nsqd ready" in ready["message"]


async def test_the_scale_subresource_scales_nsqd(operator: OperatorUnderTest) -> None:
    await operator.create("NsqCluster", "scaled", {"nsqd": {"replicas": 1}, "lookupd": {"replicas": 1}})
    obj = await operator.ready("NsqCluster", "scaled", timeout=40)
    scale = scale_of(obj)
    assert scale["spec"]["replicas"] == 1 and scale["status"]["replicas"] == 1
    assert await pods_selected(operator, scale["status"]["selector"]) == {"scaled-nsqd-0"}

    await kubectl_scale(operator, "scaled", 2)

    obj = await operator.ready("NsqCluster", "scaled", timeout=40)
    scale = scale_of(obj)
    assert scale["spec"]["replicas"] == 2 and scale["status"]["replicas"] == 2
    assert await pods_selected(operator, scale["status"]["selector"]) == {"scaled-nsqd-0", "scaled-nsqd-1"}
    assert obj["status"]["nsqd"]["readyReplicas"] == 2 and obj["status"]["nsqd"]["registeredInAllLookupds"] is True
    producers = {p["broadcast_address"] for p in operator.pod_json("scaled-lookupd-0", "/nodes")["producers"]}
    assert producers == {f"scaled-nsqd-{i}.scaled-nsqd-headless.{NAMESPACE}.svc" for i in range(2)}


async def test_a_name_too_long_for_its_objects_is_refused_and_the_longest_runs(operator: OperatorUnderTest) -> None:
    """At 45 characters, <name>-lookupd's pods would carry a controller-revision-hash label
    of 64 characters, which the apiserver refuses: the CRD refuses the name first."""
    from nsq_operator.builders.limits import MAX_CLUSTER_NAME
    longest = ("nsq" + "x" * 63)[:MAX_CLUSTER_NAME]
    body = {"apiVersion": "nsq.dev/v1alpha1", "kind": "NsqCluster",
            "metadata": {"name": longest + "y", "namespace": NAMESPACE}, "spec": {}}
    status, answer = await operator.attempt("POST", operator._path("NsqCluster"), body)
    assert status == 422 and f"at most {MAX_CLUSTER_NAME} characters" in answer["message"], answer
    assert len(operator.backstage.take_rejections()) == 1
    await operator.create("NsqCluster", longest, {"nsqd": {"replicas": 1}, "lookupd": {"replicas": 1},
                                                  "drainTimeoutSeconds": 2})
    await operator.ready("NsqCluster", longest, timeout=60)  # every pod made, revision label and all
    pods = await operator.core(f"/api/v1/namespaces/{NAMESPACE}/pods")
    revisions = [p["metadata"]["labels"]["controller-revision-hash"] for p in pods["items"]
                 if p["metadata"]["name"].startswith(longest)]
    assert max(map(len, revisions)) == 63
    await operator.delete("NsqCluster", longest)
