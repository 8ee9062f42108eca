"""NsqTopic and NsqChannel against real nsqds, past creation: the tombstone in lookupd when a
topic is deleted, refusals and Retain, emptying a topic, unpausing through the spec,
channel drift, messages in flight per node, and a status that says what nsqd says."""
from __future__ import annotations

import json
from dataclasses import dataclass
from functools import partial
from typing import Any

import pytest
from aiohttp import web

from nsq_operator.constants import EMPTY_REQUEST_ANNOTATION
from tests.operator.conftest import NAMESPACE
from tests.operator.harness import OperatorUnderTest
from tests.operator.raw_consumer import HeldMessage
from tests.operator.relay import relay_to, relayed
from tests.operator.test_operator_topology import NODES, publish, wait_condition
from tests.operator.test_operator_topology import cluster  # noqa: F401  (its fixture: one cluster per module)

pytestmark = pytest.mark.asyncio(loop_scope="module")
LOOKUPD = "main-lookupd-0"


def broadcast_address(pod: str) -> str:
    return f"{pod}.main-nsqd-headless.{NAMESPACE}.svc"


async def node_status(operator: OperatorUnderTest, kind: str, name: str) -> dict[str, dict[str, Any]]:
    status = (await operator.get(kind, name) or {}).get("status") or {}
    return {n["pod"]: n for n in status.get("nodes") or []}


@dataclass
class LookupdView:
    """What lookupd said at one moment: who /lookup hands out, and /nodes' tombstone flags."""
    handed_out: set[str]
    tombstones: dict[str, dict[str, bool]]  # broadcast address -> topic -> tombstoned


def lookupd_view(operator: OperatorUnderTest, topic: str) -> LookupdView:
    status, body = operator.pod_call(LOOKUPD, "GET", f"/lookup?topic={topic}")
    assert status in (200, 404), (status, body)  # 404: lookupd does not know the topic (any more)
    producers = json.loads(body)["producers"] if status == 200 else []
    nodes = operator.pod_json(LOOKUPD, "/nodes")["producers"]
    return LookupdView({p["broadcast_address"] for p in producers},
                       {n["broadcast_address"]: dict(zip(n["topics"], n["tombstones"])) for n in nodes})


async def test_topic_deletion_tombstones_it_before_nsqd_lets_it_go(operator: OperatorUnderTest, cluster: str) -> None:
    await operator.create("NsqTopic", "gone", {"cluster": cluster, "deletionPolicy": "Delete"})
    await operator.ready("NsqTopic", "gone")

    async def handed_out_by_lookupd() -> bool:
        return lookupd_view(operator, "gone").handed_out == {broadcast_address(pod) for pod in NODES}
    await operator.until(handed_out_by_lookupd, 40, "both nsqds registered for gone")

    # lookupd as it stands when nsqd-0 is told to delete the topic: nsqd still has it and
    # is still registered for it, so only a tombstone can keep lookupd from handing it out
    # (the deletion may be carried out more than once: only the first call counts)
    seen: list[LookupdView] = []

    async def look(request: web.Request) -> None:
        if request.query.get("topic") == "gone":
            seen.append(lookupd_view(operator, "gone"))
    async with relay_to(operator, NODES[0]) as relay:
        relay.before[("POST", "/topic/delete")] = look
        with relayed(operator, {NODES[0]: relay}):
            await operator.delete("NsqTopic", "gone")

            async def deleted() -> bool:
                return await operator.get("NsqTopic", "gone") is None
            await operator.until(deleted, 40, "NsqTopic gone deleted")

    assert seen, "nsqd-0 was never told to delete the topic"
    node = broadcast_address(NODES[0])
    assert node not in seen[0].handed_out
    assert seen[0].tombstones[node].get("gone") is True  # still registered, and tombstoned
    assert all(operator.topic_on(pod, "gone") is None for pod in NODES)
    assert "gone" not in operator.pod_json(LOOKUPD, "/topics")["topics"]


async def test_a_topic_holding_messages_is_not_deleted(operator: OperatorUnderTest, cluster: str) -> None:
    await operator.create("NsqTopic", "ledger", {"cluster": cluster, "deletionPolicy": "Delete"})
    await operator.ready("NsqTopic", "ledger")
    publish(operator, NODES[0], "ledger", 2)
    await operator.delete("NsqTopic", "ledger")

    condition = await wait_condition(operator, "NsqTopic", "ledger", "Degraded", "DeletionRefused")
    assert "2 messages" in condition["message"] and NODES[0] in condition["message"]
    assert await operator.get("NsqTopic", "ledger") is not None
    assert operator.topic_on(NODES[0], "ledger")["depth"] == 2

    await operator.patch("NsqTopic", "ledger", {"spec": {"deleteWithMessages": True}})

    async def gone() -> bool:
        return await operator.get("NsqTopic", "ledger") is None
    await operator.until(gone, 40, "NsqTopic ledger deleted")
    assert all(operator.topic_on(pod, "ledger") is None for pod in NODES)


async def test_a_retained_channel_stays_on_nsqd(operator: OperatorUnderTest, cluster: str) -> None:
    await operator.create("NsqChannel", "keeper", {"cluster": cluster, "topic": "kept-events"})
    await operator.ready("NsqChannel", "keeper")
    publish(operator, NODES[0], "kept-events", 1)
    await operator.delete("NsqChannel", "keeper")

    async def gone() -> bool:
        return await operator.get("NsqChannel", "keeper") is None
    await operator.until(gone, 40, "NsqChannel keeper deleted")
    assert all(operator.channel_on(pod, "kept-events", "keeper") is not None for pod in NODES)
    assert operator.channel_on(NODES[0], "kept-events", "keeper")["depth"] == 1


async def test_a_topic_is_emptied_once_on_request(operator: OperatorUnderTest, cluster: str) -> None:
    await operator.create("NsqTopic", "backlog", {"cluster": cluster})
    await operator.ready("NsqTopic", "backlog")
    publish(operator, NODES[1], "backlog", 3)

    async def depth(expected: int) -> bool:
        return (await node_status(operator, "NsqTopic", "backlog"))[NODES[1]]["depth"] == expected
    await operator.until(lambda: depth(3), 40, "status shows 3 waiting on nsqd-1")

    await operator.patch("NsqTopic", "backlog", {"metadata": {"annotations": {EMPTY_REQUEST_ANNOTATION: "2026-11-23T08:00:00Z"}}})

    async def recorded() -> bool:
        return (await operator.get("NsqTopic", "backlog"))["status"].get("emptiedRequest") == "2026-11-23T08:00:00Z"
    await operator.until(recorded, 40, "empty request recorded")
    assert operator.topic_on(NODES[1], "backlog")["depth"] == 0

    publish(operator, NODES[1], "backlog", 2)  # the same request is not acted on again
    await operator.until(lambda: depth(2), 40, "status shows the 2 new messages")
    assert operator.topic_on(NODES[1], "backlog")["depth"] == 2


@pytest.mark.parametrize("kind, name, spec, find", [
    ("NsqTopic", "resume", {}, lambda op, pod: op.topic_on(pod, "resume")),
    ("NsqChannel", "resume-ch", {"topic": "resumed"}, lambda op, pod: op.channel_on(pod, "resumed", "resume-ch")),
], ids=["topic", "channel"])
async def test_unpausing_through_the_spec(operator: OperatorUnderTest, cluster: str, kind: str, name: str,
                                          spec: dict[str, Any], find: Any) -> None:
    await operator.create(kind, name, {"cluster": cluster, "paused": True, **spec})
    await operator.ready(kind, name)
    assert all(find(operator, pod)["paused"] for pod in NODES)
    assert all(n["paused"] for n in (await node_status(operator, kind, name)).values())

    await operator.patch(kind, name, {"spec": {"paused": False}})

    obj = await operator.ready(kind, name)
    assert not any(find(operator, pod)["paused"] for pod in NODES)
    assert [n["paused"] for n in obj["status"]["nodes"]] == [False, False]


async def test_channel_drift_is_put_back(operator: OperatorUnderTest, cluster: str) -> None:
    await operator.create("NsqChannel", "drifty", {"cluster": cluster, "topic": "drift", "paused": True})
    await operator.ready("NsqChannel", "drifty")

    assert operator.pod_call(NODES[0], "POST", "/channel/unpause?topic=drift&channel=drifty")[0] == 200
    assert operator.pod_call(NODES[1], "POST", "/channel/delete?topic=drift&channel=drifty")[0] == 200

    async def back_and_paused() -> bool:
        return all((operator.channel_on(pod, "drift", "drifty") or {}).get("paused") for pod in NODES)
    await operator.until(back_and_paused, 40, "drifty recreated and paused again")


async def test_messages_in_flight_are_counted_per_node(operator: OperatorUnderTest, cluster: str) -> None:
    await operator.create("NsqTopic", "work", {"cluster": cluster})
    await operator.create("NsqChannel", "workers", {"cluster": cluster, "topic": "work"})
    await operator.ready("NsqTopic", "work")
    await operator.ready("NsqChannel", "workers")
    publish(operator, NODES[0], "work", 1)

    async def in_flight(kind: str, name: str, on: dict[str, int]) -> bool:
        nodes = await node_status(operator, kind, name)
        return {pod: n["inFlight"] for pod, n in nodes.items()} == on

    tcp = operator.pods.tcp(NODES[0])
    assert tcp is not None
    async with HeldMessage(tcp, "work", "workers") as held:
        assert held.body == b"m0"
        for kind, name in (("NsqChannel", "workers"), ("NsqTopic", "work")):
            await operator.until(partial(in_flight, kind, name, {NODES[0]: 1, NODES[1]: 0}), 40, f"{name} shows 1 in flight")
            assert (await operator.get(kind, name))["status"]["inFlight"] == 1

        await held.finish()

        async def done(kind: str, name: str) -> bool:
            status = (await operator.get(kind, name))["status"]
            return status["inFlight"] == 0 and status["depth"] == 0 and await in_flight(kind, name, {NODES[0]: 0, NODES[1]: 0})
        for kind, name in (("NsqChannel", "workers"), ("NsqTopic", "work")):
            await operator.until(partial(done, kind, name), 40, f"{name} shows nothing in flight after FIN")


async def test_status_shows_the_paused_flag_nsqd_reports(operator: OperatorUnderTest, cluster: str) -> None:
    """Someone unpauses the topic on nsqd-1 each time right after the operator pauses it:
    status must show nsqd-1 unpaused (and not Ready), not the spec's wish."""
    async def unpause_again(request: web.Request) -> None:
        topic = request.query["topic"]
        assert operator.pod_call(NODES[1], "POST", f"/topic/unpause?topic={topic}")[0] == 200

    async with relay_to(operator, NODES[1]) as relay:
        relay.after[("POST", "/topic/pause")] = unpause_again
        with relayed(operator, {NODES[1]: relay}):
            await operator.create("NsqTopic", "stubborn", {"cluster": cluster, "paused": True})

            async def as_nsqd_says() -> bool:
                nodes = await node_status(operator, "NsqTopic", "stubborn")
                return {pod: n["paused"] for pod, n in nodes.items()} == {NODES[0]: True, NODES[1]: False}
            await operator.until(as_nsqd_says, 40, "status shows nsqd-1 unpaused")
            condition = await wait_condition(operator, "NsqTopic", "stubborn", "Progressing", "PauseNotApplied")
            assert NODES[1] in condition["message"] and NODES[0] not in condition["message"]
            assert (await operator.condition("NsqTopic", "stubborn", "Ready"))["status"] == "False"

    obj = await operator.ready("NsqTopic", "stubborn")
    assert [n["paused"] for n in obj["status"]["nodes"]] == [True, True]
