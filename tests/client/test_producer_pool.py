"""The multi-node producer: load spread round-robin, failover when an nsqd is killed with no
acknowledged message lost, a node used again once it is back, and clear errors."""
from __future__ import annotations

import asyncio
from typing import Callable

import pytest

from nsq_client import Config, Consumer, Message, ProducerPool, PublishError, ServerError
from tests.client.conftest import StartNsqd
from tests.client.helpers import channel_stats, eventually, topic_message_count
from tests.servers import HOST, Nsqd, free_port

FAST = Config(backoff_multiplier=0.05, lookupd_poll_interval=0.5, dial_timeout=1)


async def counts(nsqds: list[Nsqd], topic: str) -> list[int]:
    return [await topic_message_count(n, topic) for n in nsqds]


async def test_publishes_are_spread_round_robin(nsqd_trio: list[Nsqd], topic: str) -> None:
    nsqds = nsqd_trio
    async with ProducerPool([n.tcp_address for n in nsqds], FAST) as pool:
        for i in range(30):
            await pool.publish(topic, b"%d" % i)
        await pool.multi_publish(topic, [b"a", b"b"])
        await pool.deferred_publish(topic, 0, b"c")
    # 10 single publishes each, then the MPUB (2 messages) and the DPUB on the next two
    assert await counts(nsqds, topic) == [12, 11, 10]


async def drained(nsqds: list[Nsqd], topic: str, channel: str) -> bool:
    """Every nsqd's ``channel`` exists and holds nothing: no depth, nothing in flight."""
    for nsqd in nsqds:
        stats = await channel_stats(nsqd, topic, channel)
        if stats is None or stats["depth"] or stats["in_flight_count"]:
            return False
    return True


async def test_failover_when_an_nsqd_is_killed_loses_no_acknowledged_message(
        nsqd_trio: list[Nsqd], module_flavour: str, topic: str,
        record_property: Callable[[str, object], None]) -> None:
    """The pool fails over without a failed publish; what the killed node acknowledged is
    back when it restarts. Ours keeps every acknowledged message through SIGKILL with
    --mem-queue-size=0 (its disk queue's positions are recovered from the data itself).
    That is our guarantee, not Go's: Go nsqd v1.3.0 trusts its disk queue's metadata, synced
    every 2500 writes or 2 s, so it loses what it wrote since; for Go the test records how
    many were lost and checks the loss is confined to the killed node."""
    nsqds = nsqd_trio
    victim = nsqds[1]
    acknowledged: list[bytes] = []

    async def publish_range(pool: ProducerPool, start: int, stop: int) -> None:
        async def one(i: int) -> None:
            body = b"m%05d" % i
            await pool.publish(topic, body)
            acknowledged.append(body)
        for batch in range(start, stop, 20):
            await asyncio.gather(*(one(i) for i in range(batch, min(batch + 20, stop))))

    pool = ProducerPool([n.tcp_address for n in nsqds], FAST)
    await pool.connect()
    try:
        await publish_range(pool, 0, 200)
        held_by_victim = await topic_message_count(victim, topic)
        victim.kill()
        await publish_range(pool, 200, 600)  # every publish succeeds: failed ones moved on
        assert len(acknowledged) == 600
        assert pool.nodes[victim.tcp_address] is False

        await asyncio.to_thread(victim.start)
        await eventually(lambda: pool.nodes[victim.tcp_address], timeout=10, message="the node is back")
        before = await topic_message_count(victim, topic)
        await publish_range(pool, 600, 660)
        assert await topic_message_count(victim, topic) > before  # used again
    finally:
        await pool.stop()
        if victim.proc is None:  # the module's other tests need it back
            await asyncio.to_thread(victim.start)

    received: set[bytes] = set()

    async def collect(message: Message) -> None:
        received.add(message.body)

    consumer = Consumer(topic, "check", Config(max_in_flight=300), handler=collect)
    await consumer.connect_to_nsqds([n.tcp_address for n in nsqds])
    try:
        if module_flavour == "ours":
            await eventually(lambda: received >= set(acknowledged), timeout=15,
                             message="every acknowledged message is still there")
        else:
            await eventually(lambda: drained(nsqds, topic, "check"), timeout=15,
                             message="every nsqd delivered all it still holds")
    finally:
        await consumer.stop()
    lost = set(acknowledged) - received
    record_property("acknowledged_lost_after_sigkill", len(lost))
    assert len(lost) <= held_by_victim, f"{len(lost)} lost, more than the killed nsqd held ({held_by_victim})"


async def test_a_publish_fails_with_every_cause_when_no_nsqd_is_reachable() -> None:
    addresses = [f"{HOST}:{free_port()}" for _ in range(2)]
    pool = ProducerPool(addresses, FAST)
    try:
        with pytest.raises(PublishError) as failed:
            await pool.publish("topic", b"nowhere to go")
        assert set(failed.value.causes) == set(addresses)
        assert all(isinstance(e, OSError) for e in failed.value.causes.values())
        assert pool.nodes == {a: False for a in addresses}
    finally:
        await pool.stop()


async def test_arguments_the_client_refuses_never_reach_a_node(nsqd_trio: list[Nsqd], topic: str) -> None:
    shared_nsqd = nsqd_trio[0]
    async with ProducerPool([shared_nsqd.tcp_address], FAST) as pool:
        with pytest.raises(ValueError):
            await pool.publish(topic, b"")
        with pytest.raises(ValueError):
            await pool.publish("bad topic", b"x")
        assert pool.nodes == {shared_nsqd.tcp_address: True}


async def test_a_publish_nsqd_refuses_is_not_retried_elsewhere_and_leaves_the_node_up(
        start_nsqd: StartNsqd, topic: str) -> None:
    """nsqd's own refusal (E_BAD_MESSAGE: over its --max-msg-size, which the client does not
    check) reaches the caller, is not tried on another node, and the node stays in the
    rotation. A node that is gone, by contrast, is skipped: the publish moves on (see also
    test_failover_when_an_nsqd_is_killed_loses_no_acknowledged_message)."""
    # only the first node refuses 100-byte bodies: a retry on the second would be stored there
    strict, lenient = await asyncio.gather(asyncio.to_thread(start_nsqd, max_msg_size=64),
                                           asyncio.to_thread(start_nsqd))
    nsqds = [strict, lenient]
    # probes wait 1 s, far longer than this test takes to see a node marked down
    pool = ProducerPool([n.tcp_address for n in nsqds], Config(dial_timeout=1))
    try:
        await pool.connect()
        with pytest.raises(ServerError) as refused:
            await pool.publish(topic, b"x" * 100)  # the first in the rotation: strict
        assert refused.value.code == "E_BAD_MESSAGE"
        assert pool.nodes == {strict.tcp_address: True, lenient.tcp_address: True}
        assert await counts(nsqds, topic) == [0, 0]

        # the rotation goes on from where it was, the refusing node included
        for i in range(4):
            await pool.publish(topic, b"%d" % i)
        assert await counts(nsqds, topic) == [2, 2]

        await asyncio.to_thread(strict.kill)
        await pool.publish(topic, b"to lenient in turn")
        await pool.publish(topic, b"strict's turn, moved on")
        assert pool.nodes == {strict.tcp_address: False, lenient.tcp_address: True}
        assert await topic_message_count(lenient, topic) == 4
    finally:
        await pool.stop()


def test_a_pool_needs_somewhere_to_publish() -> None:
    with pytest.raises(ValueError):
        ProducerPool([])
