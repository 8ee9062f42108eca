"""NsqCluster under kopf against KMock's emulator, with real nsqd and nsqlookupd processes
behind the pods: creation, scaling nsqd, scaling lookupd live, and bad specs."""
from __future__ import annotations

from typing import Any

import pytest

from nsq_operator.constants import TOPOLOGY_READY_CONDITION
from tests.operator.harness import OperatorUnderTest

pytestmark = pytest.mark.asyncio(loop_scope="module")
NS = "nsq-test"


async def test_a_cluster_comes_up_ready_and_registered(operator: OperatorUnderTest) -> None:
    await operator.create("NsqCluster", "alpha",
                          {"nsqd": {"replicas": 2, "options": {"max-rdy-count": 77}}, "lookupd": {"replicas": 1}})
    obj = await operator.ready("NsqCluster", "alpha", timeout=40)
    status = obj["status"]
    assert status["nsqd"]["readyReplicas"] == 2 and status["nsqd"]["replicas"] == 2
    assert status["nsqd"]["registeredInAllLookupds"] is True
    assert status["nsqd"]["selector"] == "app.kubernetes.io/name=nsq,app.kubernetes.io/instance=alpha,app.kubernetes.io/component=nsqd"
    assert status["lookupd"]["readyReplicas"] == 1
    assert status["observedGeneration"] == obj["metadata"]["generation"]
    conditions = {c["type"]: c["status"] for c in status["conditions"]}
    assert conditions == {"Ready": "True", "Progressing": "False", "Degraded": "False"}
    # where clients connect: each address names a Service that exists, on a port it serves
    listeners = {entry["name"]: entry["address"] for entry in status["listeners"]}
    assert listeners == {"nsqd-tcp": f"alpha-nsqd.{NS}.svc:4150", "nsqd-http": f"alpha-nsqd.{NS}.svc:4151",
                         "lookupd-http": f"alpha-lookupd.{NS}.svc:4161",
                         "nsqadmin-http": f"alpha-nsqadmin.{NS}.svc:4171"}
    for address in listeners.values():
        service_name, port = address.split(".")[0], int(address.rsplit(":", 1)[1])
        service = await operator.core(f"/api/v1/namespaces/{NS}/services/{service_name}")
        assert port in [p["port"] for p in service["spec"]["ports"]], address

    sts = await operator.core(f"/apis/apps/v1/namespaces/{NS}/statefulsets/alpha-nsqd")
    assert sts["spec"]["updateStrategy"] == {"type": "OnDelete"}
    assert sts["metadata"]["ownerReferences"][0]["uid"] == obj["metadata"]["uid"]
    for path in (f"/api/v1/namespaces/{NS}/services/alpha-nsqd", f"/api/v1/namespaces/{NS}/services/alpha-nsqd-headless",
                 f"/api/v1/namespaces/{NS}/configmaps/alpha-nsq-config", f"/api/v1/namespaces/{NS}/serviceaccounts/alpha-nsq",
                 f"/apis/policy/v1/namespaces/{NS}/poddisruptionbudgets/alpha-nsqd"):
        assert await operator.core(path) is not None, path

    # the real nsqds run with the ConfigMap's options and broadcast their pod DNS names
    assert operator.pod_json("alpha-nsqd-0", "/config/max_rdy_count") == 77
    producers = {p["broadcast_address"] for p in operator.pod_json("alpha-lookupd-0", "/nodes")["producers"]}
    assert producers == {f"alpha-nsqd-{i}.alpha-nsqd-headless.{NS}.svc" for i in range(2)}
    pod = await operator.core(f"/api/v1/namespaces/{NS}/pods/alpha-nsqd-1")
    assert any(c["type"] == TOPOLOGY_READY_CONDITION and c["status"] == "True" for c in pod["status"]["conditions"])


async def test_scaling_nsqd_prepares_declared_channels_before_ready(operator: OperatorUnderTest) -> None:
    await operator.create("NsqCluster", "beta", {"nsqd": {"replicas": 1}, "lookupd": {"replicas": 1}})
    await operator.create("NsqTopic", "beta-events", {"cluster": "beta", "topicName": "events"})
    await operator.create("NsqChannel", "beta-audit", {"cluster": "beta", "topic": "events", "channelName": "audit"})
    await operator.ready("NsqCluster", "beta", timeout=40)
    await operator.ready("NsqChannel", "beta-audit")

    await operator.patch("NsqCluster", "beta", {"spec": {"nsqd": {"replicas": 2}}})

    async def new_pod_ready() -> Any:
        pod = await operator.core(f"/api/v1/namespaces/{NS}/pods/beta-nsqd-1")
        return pod if pod and any(c["type"] == "Ready" and c["status"] == "True" for c in pod["status"]["conditions"]) else None
    await operator.until(new_pod_ready, 40, "beta-nsqd-1 Ready")
    # by the time the pod is Ready, the channel exists on it: a first message reaches it
    assert operator.channel_on("beta-nsqd-1", "events", "audit") is not None
    obj = await operator.ready("NsqCluster", "beta", timeout=40)
    assert obj["status"]["nsqd"]["readyReplicas"] == 2
    assert obj["status"]["observedGeneration"] == obj["metadata"]["generation"] == 2

    async def counted_on_both() -> bool:
        status = (await operator.get("NsqChannel", "beta-audit"))["status"]
        return [n["pod"] for n in status["nodes"]] == ["beta-nsqd-0", "beta-nsqd-1"]
    await operator.until(counted_on_both, 40, "channel status lists both nsqds")


async def test_scaling_lookupd_updates_every_nsqd_live(operator: OperatorUnderTest) -> None:
    await operator.create("NsqCluster", "gamma", {"nsqd": {"replicas": 1}, "lookupd": {"replicas": 1}})
    await operator.ready("NsqCluster", "gamma", timeout=40)
    started = operator.pod_json("gamma-nsqd-0", "/stats?format=json")["start_time"]

    await operator.patch("NsqCluster", "gamma", {"spec": {"lookupd": {"replicas": 2}}})

    obj = await operator.ready("NsqCluster", "gamma", timeout=40)
    wanted = sorted(operator.pods.tcp(f"gamma-lookupd-{i}") for i in range(2))

    async def both_lookupds() -> bool:
        return sorted(operator.pod_json("gamma-nsqd-0", "/config/nsqlookupd_tcp_addresses")) == wanted
    await operator.until(both_lookupds, 30, "nsqd told about both lookupds")
    assert obj["status"]["lookupd"]["readyReplicas"] == 2
    assert obj["status"]["nsqd"]["registeredInAllLookupds"] is True
    assert operator.pod_json("gamma-nsqd-0", "/stats?format=json")["start_time"] == started  # no restart
    config = await operator.core(f"/api/v1/namespaces/{NS}/configmaps/gamma-nsq-config")
    assert "gamma-lookupd-1.gamma-lookupd.nsq-test.svc:4160" in config["data"]["nsqd.conf"]


async def test_the_apiserver_refuses_what_the_schema_refuses(operator: OperatorUnderTest) -> None:
    status, answer = await operator.attempt("POST", operator._path("NsqCluster"), {
        "apiVersion": "nsq.dev/v1alpha1", "kind": "NsqCluster",
        "metadata": {"name": "bad-replicas", "namespace": NS}, "spec": {"nsqd": {"replicas": -1}}})
    assert status == 422 and "spec.nsqd.replicas" in answer["message"]
    assert [r["path"] for r in operator.backstage.take_rejections()] == [operator._path("NsqCluster").removeprefix(operator.api)]
    assert await operator.get("NsqCluster", "bad-replicas") is None


@pytest.mark.parametrize("name, spec, field", [
    ("bad-timeout", {"nsqd": {"options": {"msg-timeout": "0s"}}}, "spec.nsqd.options.msg-timeout"),
    ("bad-metrics", {"metrics": {"enabled": True}}, "spec.metrics"),
    ("bad-order", {"nsqd": {"options": {"msg-timeout": "10m", "max-msg-timeout": "5m"}}}, "spec.nsqd.options"),
])
async def test_bad_cluster_specs_are_degraded_naming_the_field(operator: OperatorUnderTest, name: str,
                                                               spec: dict[str, Any], field: str) -> None:
    # what the schema cannot say (bounds of durations, one field depending on another)
    # reaches the operator, which names the field
    await operator.create("NsqCluster", name, spec)

    async def degraded() -> Any:
        c = await operator.condition("NsqCluster", name, "Degraded")
        return c if c and c["status"] == "True" else None
    condition = await operator.until(degraded, 20, f"{name} Degraded")
    assert condition["reason"] == "InvalidSpec"
    assert field in condition["message"]
    assert await operator.core(f"/apis/apps/v1/namespaces/{NS}/statefulsets/{name}-nsqd") is None

    async def problem_event() -> Any:  # kopf names the type after the log level: Warning or Error
        events = await operator.core(f"/api/v1/namespaces/{NS}/events")
        return [e for e in (events or {}).get("items", [])
                if e.get("involvedObject", {}).get("name") == name and e.get("type") in ("Warning", "Error")
                and field in e.get("message", "")]
    await operator.until(problem_event, 20, f"an event about {name} naming {field}")


async def test_owned_objects_are_put_back_and_the_cluster_can_be_deleted(operator: OperatorUnderTest) -> None:
    await operator.create("NsqCluster", "delta", {"nsqd": {"replicas": 0}, "lookupd": {"replicas": 1}})
    await operator.ready("NsqCluster", "delta", timeout=40)
    path = f"/api/v1/namespaces/{NS}/configmaps/delta-nsq-config"
    original = (await operator.core(path))["data"]
    async with operator.session.patch(operator.api + path, json={"data": {"nsqd.conf": "mem_queue_size = 1\n"}},
                                      headers={"Content-Type": "application/merge-patch+json"}) as r:
        assert r.status == 200

    async def restored() -> bool:
        return (await operator.core(path))["data"] == original
    await operator.until(restored, 40, "ConfigMap put back")

    await operator.delete("NsqCluster", "delta")

    async def gone() -> bool:
        return await operator.get("NsqCluster", "delta") is None
    await operator.until(gone, 40, "NsqCluster deleted (children go by their owner references)")
