"""The multi-node producer: load spread round-robin, failover when an nsqd is killed with no
acknowledged message lost, a node used again once it is back, and clear errors."""
from __future__ import annotations

import asyncio

import pytest

from nsq_client import Config, Consumer, Message, ProducerPool, PublishError
from tests.client.helpers import eventually, topic_message_count
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


async def test_failover_when_an_nsqd_is_killed_loses_no_acknowledged_message(nsqd_trio: list[Nsqd],
                                                                              topic: str) -> None:
    # the trio keeps every acknowledged message in its disk queues (mem_queue_size=0), so a
    # SIGKILLed nsqd still has what it acknowledged when it comes back
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
        await eventually(lambda: received >= set(acknowledged), timeout=15,
                         message="every acknowledged message is still there")
    finally:
        await consumer.stop()


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


async def test_bad_arguments_are_not_retried_elsewhere(nsqd_trio: list[Nsqd], topic: str) -> None:
    shared_nsqd = nsqd_trio[0]
    async with ProducerPool([shared_nsqd.tcp_address], FAST) as pool:
        with pytest.raises(ValueError):
            await pool.publish(topic, b"")
        with pytest.raises(ValueError):
            await pool.publish("bad topic", b"x")
        assert pool.nodes == {shared_nsqd.tcp_address: True}


def test_a_pool_needs_somewhere_to_publish() -> None:
    with pytest.raises(ValueError):
        ProducerPool([])
