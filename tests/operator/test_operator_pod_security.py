"""Pods in a namespace that enforces Pod Security "restricted" (the harness's namespace
does, and its emulator refuses pods that break the profile as an API server does): the
generated pods are admitted, a user's pod template override reaches every pod, and an
override that breaks the profile leaves the StatefulSet without pods (FailedCreate)."""
from __future__ import annotations

from typing import Any

import pytest

from tests.operator.harness import OperatorUnderTest
from tests.operator.rolling import pod, rolled
from tests.operator.test_pod_template import SIDECAR

pytestmark = pytest.mark.asyncio(loop_scope="module")


async def statefulset_events(operator: OperatorUnderTest, name: str, reason: str) -> list[dict[str, Any]]:
    items = (await operator.core(f"/api/v1/namespaces/{operator.namespace}/events") or {}).get("items", [])
    return [e for e in items if e["involvedObject"].get("kind") == "StatefulSet"
            and e["involvedObject"].get("name") == name and e.get("reason") == reason]


async def test_generated_pods_are_admitted_and_an_override_reaches_every_pod(operator: OperatorUnderTest) -> None:
    override = {"metadata": {"labels": {"team": "payments"}, "annotations": {"example.com/scrape": "true"}},
                "spec": {"securityContext": {"runAsUser": 10001},
                         "containers": [{"name": "nsqd", "env": [{"name": "EXTRA", "value": "1"}]}, SIDECAR],
                         "volumes": [{"name": "scratch", "emptyDir": {}}]}}
    await operator.create("NsqCluster", "strict", {"nsqd": {"replicas": 1, "podTemplate": override},
                                                   "lookupd": {"replicas": 1}, "drainTimeoutSeconds": 2})
    await operator.ready("NsqCluster", "strict", timeout=60)
    nsqd = await pod(operator, "strict-nsqd-0")
    assert nsqd is not None
    assert nsqd["metadata"]["labels"]["team"] == "payments"
    assert nsqd["metadata"]["annotations"]["example.com/scrape"] == "true"
    assert nsqd["spec"]["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert nsqd["spec"]["securityContext"]["runAsUser"] == 10001
    assert [c["name"] for c in nsqd["spec"]["containers"]] == ["nsqd", "exporter"]
    assert {"name": "EXTRA", "value": "1"} in nsqd["spec"]["containers"][0]["env"]
    assert "scratch" in [v["name"] for v in nsqd["spec"]["volumes"]]

    # changing the override rolls the pod onto the new template, drained like any roll
    await operator.patch("NsqCluster", "strict", {"spec": {"nsqd": {"podTemplate": {"metadata": {"labels": {"team": "ledger"}}}}}})
    await rolled(operator, "strict", ["strict-nsqd-0"])
    assert ((await pod(operator, "strict-nsqd-0")) or {})["metadata"]["labels"]["team"] == "ledger"
    assert not await statefulset_events(operator, "strict-nsqd", "FailedCreate")


async def test_an_override_that_breaks_the_profile_gets_no_pods(operator: OperatorUnderTest) -> None:
    root_sidecar = {"name": "debug", "image": "busybox", "securityContext": {"runAsUser": 0}}
    await operator.create("NsqCluster", "lax", {"nsqd": {"replicas": 1, "podTemplate": {"spec": {"containers": [root_sidecar]}}},
                                                "lookupd": {"replicas": 1}})

    async def refused() -> list[dict[str, Any]]:
        return await statefulset_events(operator, "lax-nsqd", "FailedCreate")
    (event,) = await operator.until(refused, 40, "lax-nsqd-0 refused")
    assert 'violates PodSecurity "restricted:latest"' in event["message"]
    assert "spec.containers[debug].securityContext.runAsUser must not be 0" in event["message"]
    assert await pod(operator, "lax-nsqd-0") is None
    assert await pod(operator, "lax-lookupd-0") is not None

    async def degraded() -> dict[str, Any] | None:
        c = await operator.condition("NsqCluster", "lax", "Degraded")
        return c if c and c["status"] == "True" else None
    condition = await operator.until(degraded, 40, "lax Degraded")
    assert condition["reason"] == "FailedCreate"
    assert "StatefulSet lax-nsqd" in condition["message"] and "runAsUser must not be 0" in condition["message"]
