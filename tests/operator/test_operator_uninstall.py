"""`helm uninstall` of a release with its example cluster, topic and channel: helm deletes
the kinds it knows first (the operator's Deployment among them) and the kinds it does not
know last. No finalizer guards nothing, so with the operator already gone every NsqCluster,
NsqTopic and NsqChannel still goes, and no object is left Terminating. A topic whose
deletionPolicy is Delete keeps its finalizer: it guards the topic's removal from the nsqds."""
from __future__ import annotations

from typing import Any

import pytest

from nsq_operator.constants import FINALIZER
from tests.chart.conftest import helm  # noqa: F401  (the chart tests' helm, a fixture)
from tests.chart.render import Helm
from tests.operator.harness import OperatorUnderTest
from tests.operator.rolling import pod

pytestmark = pytest.mark.asyncio(loop_scope="module")
CUSTOM = ("NsqCluster", "NsqTopic", "NsqChannel")
# helm's releaseutil.UninstallOrder, for the kinds this chart renders; a kind helm does not
# know is deleted after all of these, kinds in alphabetical order
HELM_UNINSTALL_ORDER = ["Deployment", "RoleBinding", "ClusterRoleBinding", "ClusterRole", "CustomResourceDefinition",
                        "ServiceAccount"]


def uninstall_order(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    def key(obj: dict[str, Any]) -> tuple[int, str]:
        kind = obj["kind"]
        return (HELM_UNINSTALL_ORDER.index(kind), "") if kind in HELM_UNINSTALL_ORDER else (len(HELM_UNINSTALL_ORDER), kind)
    return sorted(objects, key=key)  # stable: same kinds keep their order, as helm's sort does


async def finalizers(operator: OperatorUnderTest, kind: str, name: str) -> list[str]:
    return list(((await operator.get(kind, name)) or {}).get("metadata", {}).get("finalizers") or [])


async def test_helm_uninstall_leaves_nothing_terminating(operator: OperatorUnderTest, helm: Helm) -> None:  # noqa: F811
    values = {"exampleCluster": {"enabled": True, "name": "example",
                                 "spec": {"nsqd": {"replicas": 1}, "lookupd": {"replicas": 1}},
                                 "topics": [{"name": "orders", "channels": ["billing"]}]}}
    release = helm.template(values)
    custom = [o for o in release if o["kind"] in CUSTOM]
    assert sorted(o["kind"] for o in custom) == ["NsqChannel", "NsqCluster", "NsqTopic"]
    for obj in custom:
        await operator.create(obj["kind"], obj["metadata"]["name"], obj["spec"])
    await operator.ready("NsqCluster", "example", timeout=60)
    for obj in custom:
        await operator.ready(obj["kind"], obj["metadata"]["name"])
        assert await finalizers(operator, obj["kind"], obj["metadata"]["name"]) == [], obj["metadata"]["name"]

    # an old operator's finalizer is taken off; a topic deleted with Delete keeps its guard
    await operator.patch("NsqCluster", "example", {"metadata": {"finalizers": [FINALIZER]}})
    await operator.until(lambda: _without(operator, "NsqCluster", "example"), 20, "the old finalizer removed")
    await operator.create("NsqTopic", "guarded", {"cluster": "example", "deletionPolicy": "Delete"})
    await operator.ready("NsqTopic", "guarded")
    assert await finalizers(operator, "NsqTopic", "guarded") == [FINALIZER]
    await operator.delete("NsqTopic", "guarded")
    await operator.until(lambda: _gone(operator, "NsqTopic", "guarded"), 30, "the guarded topic deleted")

    for obj in uninstall_order(release):
        if obj["kind"] == "Deployment":
            await operator.stop_operator()  # the operator is the first to go
        elif obj["kind"] in CUSTOM:
            await operator.delete(obj["kind"], obj["metadata"]["name"])
    for obj in custom:
        await operator.until(lambda: _gone(operator, obj["kind"], obj["metadata"]["name"]), 20,
                             f"{obj['kind']} {obj['metadata']['name']} gone without an operator")
    # and what it owned goes by its owner references (the harness kubelet collects it)
    await operator.until(lambda: _pod_gone(operator, "example-nsqd-0"), 60, "example-nsqd-0 gone")


async def _without(operator: OperatorUnderTest, kind: str, name: str) -> bool:
    return await finalizers(operator, kind, name) == []


async def _gone(operator: OperatorUnderTest, kind: str, name: str) -> bool:
    return await operator.get(kind, name) is None


async def _pod_gone(operator: OperatorUnderTest, name: str) -> bool:
    return await pod(operator, name) is None
