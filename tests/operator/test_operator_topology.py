"""NsqTopic and NsqChannel under kopf against KMock's emulator, reconciled onto the real
nsqd processes of one cluster: create, pause, drift, empty on request, delete per policy,
and bad specs."""
from __future__ import annotations

from typing import Any, AsyncIterator

import pytest
import pytest_asyncio

from nsq_operator.constants import EMPTY_REQUEST_ANNOTATION
from tests.operator.harness import OperatorUnderTest

pytestmark = pytest.mark.asyncio(loop_scope="module")
NODES = ["main-nsqd-0", "main-nsqd-1"]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def cluster(operator: OperatorUnderTest) -> AsyncIterator[str]:
    await operator.create("NsqCluster", "main", {"nsqd": {"replicas": 2}, "lookupd": {"replicas": 1}})
    await operator.ready("NsqCluster", "main", timeout=40)
    yield "main"


def publish(operator: OperatorUnderTest, pod: str, topic: str, count: int) -> None:
    for i in range(count):
        assert operator.pod_call(pod, "POST", f"/pub?topic={topic}", f"m{i}".encode())[0] == 200


async def wait_condition(operator: OperatorUnderTest, kind: str, name: str, type_: str, reason: str | None = None) -> Any:
    async def probe() -> Any:
        c = await operator.condition(kind, name, type_)
        return c if c and c["status"] == "True" and (reason is None or c["reason"] == reason) else None
    return await operator.until(probe, 20, f"{kind} {name} {type_}")


async def test_topic_is_created_paused_and_kept_so(operator: OperatorUnderTest, cluster: str) -> None:
    await operator.create("NsqTopic", "orders", {"cluster": cluster})
    obj = await operator.ready("NsqTopic", "orders")
    assert obj["status"]["name"] == "orders"
    assert [n["pod"] for n in obj["status"]["nodes"]] == NODES
    assert all(operator.topic_on(pod, "orders") is not None for pod in NODES)

    await operator.patch("NsqTopic", "orders", {"spec": {"paused": True}})

    async def paused_everywhere() -> bool:
        return all((operator.topic_on(pod, "orders") or {}).get("paused") for pod in NODES)
    await operator.until(paused_everywhere, 40, "orders paused on every nsqd")

    # drift: unpaused by hand on one node, deleted by hand on the other
    assert operator.pod_call(NODES[0], "POST", "/topic/unpause?topic=orders")[0] == 200
    assert operator.pod_call(NODES[1], "POST", "/topic/delete?topic=orders")[0] == 200
    await operator.until(paused_everywhere, 40, "orders put back and paused again")


async def test_empty_request_is_acted_on_once(operator: OperatorUnderTest, cluster: str) -> None:
    await operator.create("NsqChannel", "payments-ledger", {"cluster": cluster, "topic": "payments", "channelName": "ledger"})
    await operator.ready("NsqChannel", "payments-ledger")
    publish(operator, NODES[0], "payments", 3)

    async def depth(expected: int) -> bool:
        status = (await operator.get("NsqChannel", "payments-ledger"))["status"]
        return status["depth"] == expected and {n["pod"]: n["depth"] for n in status["nodes"]}[NODES[0]] == expected
    await operator.until(lambda: depth(3), 40, "status shows 3 waiting on main-nsqd-0")

    await operator.patch("NsqChannel", "payments-ledger",
                         {"metadata": {"annotations": {EMPTY_REQUEST_ANNOTATION: "2026-11-22T10:00:00Z"}}})

    async def emptied() -> bool:
        status = (await operator.get("NsqChannel", "payments-ledger"))["status"]
        return status.get("emptiedRequest") == "2026-11-22T10:00:00Z"
    await operator.until(emptied, 40, "empty request recorded")
    assert operator.channel_on(NODES[0], "payments", "ledger")["depth"] == 0

    # the same request is not acted on again: new messages stay
    publish(operator, NODES[0], "payments", 2)
    await operator.until(lambda: depth(2), 40, "status shows the 2 new messages")
    assert operator.channel_on(NODES[0], "payments", "ledger")["depth"] == 2


async def test_channel_deletion_is_refused_while_it_holds_messages(operator: OperatorUnderTest, cluster: str) -> None:
    await operator.create("NsqChannel", "audit", {"cluster": cluster, "topic": "invoices", "deletionPolicy": "Delete"})
    await operator.ready("NsqChannel", "audit")
    publish(operator, NODES[1], "invoices", 2)
    await operator.delete("NsqChannel", "audit")

    condition = await wait_condition(operator, "NsqChannel", "audit", "Degraded", "DeletionRefused")
    assert "2 messages" in condition["message"] and NODES[1] in condition["message"]
    assert await operator.get("NsqChannel", "audit") is not None
    assert operator.channel_on(NODES[1], "invoices", "audit") is not None

    await operator.patch("NsqChannel", "audit", {"spec": {"deleteWithMessages": True}})

    async def gone() -> bool:
        return await operator.get("NsqChannel", "audit") is None
    await operator.until(gone, 40, "NsqChannel audit deleted")
    assert all(operator.channel_on(pod, "invoices", "audit") is None for pod in NODES)


async def test_topic_deletion_follows_the_policy(operator: OperatorUnderTest, cluster: str) -> None:
    await operator.create("NsqTopic", "kept", {"cluster": cluster})
    await operator.create("NsqTopic", "dropped", {"cluster": cluster, "deletionPolicy": "Delete"})
    await operator.ready("NsqTopic", "kept")
    await operator.ready("NsqTopic", "dropped")

    async def registered(topic: str) -> bool:
        return topic in operator.pod_json("main-lookupd-0", "/topics")["topics"]
    await operator.until(lambda: registered("dropped"), 40, "dropped known to lookupd")

    await operator.delete("NsqTopic", "kept")
    await operator.delete("NsqTopic", "dropped")

    async def both_gone() -> bool:
        return await operator.get("NsqTopic", "kept") is None and await operator.get("NsqTopic", "dropped") is None
    await operator.until(both_gone, 40, "both NsqTopics deleted")
    assert all(operator.topic_on(pod, "kept") is not None for pod in NODES)
    assert all(operator.topic_on(pod, "dropped") is None for pod in NODES)
    assert not await registered("dropped")


async def test_a_name_nsq_cannot_take_is_degraded_naming_the_field(operator: OperatorUnderTest, cluster: str) -> None:
    # the schema cannot say it: metadata.name is the topic's name when topicName is unset
    await operator.create("NsqTopic", "t" * 70, {"cluster": cluster})
    condition = await wait_condition(operator, "NsqTopic", "t" * 70, "Degraded", "InvalidSpec")
    assert "metadata.name" in condition["message"]


@pytest.mark.parametrize("kind, name, spec, field", [
    ("NsqTopic", "spaced", {"cluster": "main", "topicName": "has space"}, "spec.topicName"),
    ("NsqChannel", "nameless", {"cluster": "main", "topic": "ok", "channelName": "a/b"}, "spec.channelName"),
    ("NsqChannel", "topicless", {"cluster": "main"}, "spec.topic"),
])
async def test_the_apiserver_refuses_bad_specs_naming_the_field(operator: OperatorUnderTest, kind: str, name: str,
                                                                spec: dict[str, Any], field: str) -> None:
    status, answer = await operator.attempt("POST", operator._path(kind), {
        "apiVersion": "nsq.dev/v1alpha1", "kind": kind, "metadata": {"name": name, "namespace": operator.namespace},
        "spec": spec})
    assert status == 422 and field in answer["message"], answer
    assert len(operator.backstage.take_rejections()) == 1
    assert await operator.get(kind, name) is None


async def test_a_topic_of_a_missing_cluster_waits(operator: OperatorUnderTest, cluster: str) -> None:
    await operator.create("NsqTopic", "orphan", {"cluster": "nowhere"})
    condition = await wait_condition(operator, "NsqTopic", "orphan", "Progressing")
    assert "nowhere" in condition["message"]
    # and the operator keeps serving the others
    await operator.create("NsqTopic", "after", {"cluster": cluster})
    await operator.ready("NsqTopic", "after")


async def test_a_refused_status_write_does_not_end_the_periodic_pass(operator: OperatorUnderTest, cluster: str) -> None:
    """The apiserver refuses a write now and then (409 when its own retries under contention
    run out, 5xx while it restarts): the topic's status must follow its nsqds afterwards
    as before, not stay at what it said last."""
    await operator.create("NsqTopic", "ledger", {"cluster": cluster})
    await operator.ready("NsqTopic", "ledger")

    async def depth(expected: int) -> bool:
        return (await operator.get("NsqTopic", "ledger"))["status"]["depth"] == expected

    async def refused() -> bool:
        return operator.backstage.conflicts_waiting() == []

    operator.backstage.conflict_status_write("NsqTopic", "ledger")
    publish(operator, NODES[0], "ledger", 3)  # the pass that says so meets the 409
    await operator.until(refused, 20, "the status write refused")
    await operator.until(lambda: depth(3), 20, "status shows the 3 messages once writes are accepted again")
    publish(operator, NODES[0], "ledger", 2)
    await operator.until(lambda: depth(5), 20, "status goes on following the nsqd")
