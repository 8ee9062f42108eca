"""spec.admin end to end, on the emulated API server: the operator writes nsqadmin's
Deployment and Service; the test plays the Deployment controller and kubelet for it (runs
the container's command with its arguments, the lookupds' DNS names resolved to the test
kubelet's processes), and the running nsqadmin lists the cluster's topics and nodes."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.admin.processes import AdminProcess
from tests.operator.conftest import NAMESPACE
from tests.operator.harness import OperatorUnderTest
from tests.servers import wait_for

pytestmark = pytest.mark.asyncio(loop_scope="module")
LOOKUPD_FLAG = "--lookupd-http-address="


def as_run_here(operator: OperatorUnderTest, args: list[str]) -> dict[str, Any]:
    """The container's flags for a process on this machine: each lookupd pod's DNS name
    becomes the address of the process behind that pod; the listen address is the test's."""
    flags: dict[str, Any] = {"lookupd-http-address": []}
    for arg in args:
        if arg.startswith(LOOKUPD_FLAG):
            pod = arg.removeprefix(LOOKUPD_FLAG).split(".")[0]
            flags["lookupd-http-address"].append(operator.pods.http(pod).removeprefix("http://"))
        elif not arg.startswith("--http-address="):
            name, _, value = arg.removeprefix("--").partition("=")
            flags[name] = value
    return flags


async def test_nsqadmin_lists_the_clusters_topics(operator: OperatorUnderTest, tmp_path: Path) -> None:
    await operator.create("NsqCluster", "web", {"nsqd": {"replicas": 2}, "lookupd": {"replicas": 1}})
    await operator.ready("NsqCluster", "web", timeout=60)
    await operator.create("NsqTopic", "orders", {"cluster": "web"})
    await operator.ready("NsqTopic", "orders")
    apps = f"/apis/apps/v1/namespaces/{NAMESPACE}"
    deployment = await operator.until(lambda: operator.core(f"{apps}/deployments/web-nsqadmin"), 20, "the Deployment")
    service = await operator.core(f"/api/v1/namespaces/{NAMESPACE}/services/web-nsqadmin")
    template = deployment["spec"]["template"]
    assert service["spec"]["selector"].items() <= template["metadata"]["labels"].items()
    assert deployment["spec"]["replicas"] == 1

    container = template["spec"]["containers"][0]
    assert container["command"] == ["nsqadmin"]
    admin = AdminProcess(tmp_path / "nsqadmin", as_run_here(operator, container["args"]))
    admin.start()
    try:
        def topics() -> list[str]:
            return admin.get_json("/api/topics")["topics"] or []
        wait_for(lambda: "orders" in topics(), 20, message="nsqadmin lists the cluster's topic")
        # the nsqds as lookupd knows them: by their pods' stable DNS names (which only the
        # operator's test resolver maps to processes here, so their stats are not asked)
        nodes = admin.get_json("/api/nodes")["nodes"]
        assert sorted(n["broadcast_address"] for n in nodes) == \
            [f"web-nsqd-{i}.web-nsqd-headless.{NAMESPACE}.svc" for i in (0, 1)]
        assert all(n["topics"] == [{"topic": "orders", "tombstoned": False}] for n in nodes)
    finally:
        admin.stop()

    await operator.patch("NsqCluster", "web", {"spec": {"admin": {"enabled": False}}})

    async def scaled_to_zero() -> bool:
        found = await operator.core(f"{apps}/deployments/web-nsqadmin")
        return bool(found and found["spec"]["replicas"] == 0)
    await operator.until(scaled_to_zero, 30, "nsqadmin scaled to zero")
