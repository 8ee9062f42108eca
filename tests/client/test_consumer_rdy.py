"""RDY management read off the wire (a recording proxy in front of each nsqd): backoff's
RDY 0 / RDY 1 probe / back to full, max_in_flight split across nsqds with the remainder
distributed, and redistribution when max_in_flight is smaller than the connection count."""
from __future__ import annotations

import asyncio
from typing import AsyncIterator

import pytest

from nsq_client import Config, Consumer, Message, Producer
from tests.client.helpers import eventually
from tests.client.wire import RecordingProxy
from tests.servers import HOST, Nsqd


@pytest.fixture
async def three_proxied_nsqds(nsqd_trio: list[Nsqd]) -> AsyncIterator[list[tuple[Nsqd, RecordingProxy]]]:
    proxies = [await RecordingProxy(HOST, n.tcp_port).start() for n in nsqd_trio]
    yield list(zip(nsqd_trio, proxies))
    for proxy in proxies:
        await proxy.close()


async def test_backoff_sends_rdy_0_then_probes_with_rdy_1(nsqd_trio: list[Nsqd], topic: str) -> None:
    shared_nsqd = nsqd_trio[0]
    proxy = await RecordingProxy(HOST, shared_nsqd.tcp_port).start()
    outcomes: list[tuple[int, bool]] = []

    async def handler(message: Message) -> None:
        ok = message.body == b"second" or message.attempts >= 3
        outcomes.append((message.attempts, ok))
        if not ok:
            raise RuntimeError("failing on purpose")

    async with Producer(shared_nsqd.tcp_address) as producer:
        await producer.publish(topic, b"first")
        config = Config(max_in_flight=3, backoff_multiplier=0.05, default_requeue_delay=0)
        consumer = Consumer(topic, "ch", config, handler=handler)
        await consumer.connect_to_nsqd(proxy.address)
        try:
            wire = proxy.connections[0]
            # fail (level 1), probe, fail (level 2), probe, succeed (down to level 1), probe
            expected = [3, 0, 1, 0, 1, 0, 1]
            await eventually(lambda: wire.rdy_counts() == expected, timeout=5,
                             message=f"RDY sequence {expected}")
            assert outcomes == [(1, False), (2, False), (3, True)]
            # the probe waits for a message; its success leaves backoff: back to RDY 3
            await producer.publish(topic, b"second")
            await eventually(lambda: wire.rdy_counts() == expected + [3], timeout=5)
            assert outcomes[-1] == (1, True)
            await eventually(lambda: consumer.stats().messages_finished == 2)
        finally:
            await consumer.stop()
            await proxy.close()
    # two backoff waits at level 1 (2 x 0.05 s) and one at level 2 (4 x 0.05 s), in order
    rdy = [s for s in wire.sent if s.name == "RDY"]
    gaps = [later.at - earlier.at for earlier, later in zip(rdy[1:], rdy[2:]) if earlier.params == ("0",)]
    assert len(gaps) == 3
    assert gaps[0] >= 0.09 and gaps[1] >= 0.19 and gaps[2] >= 0.09


async def test_max_in_flight_is_split_across_nsqds_with_the_remainder_given_out(
        three_proxied_nsqds: list[tuple[Nsqd, RecordingProxy]], topic: str) -> None:
    async def handler(message: Message) -> None:
        pass

    consumer = Consumer(topic, "ch", Config(max_in_flight=10), handler=handler)
    try:
        for _, proxy in three_proxied_nsqds:
            await consumer.connect_to_nsqd(proxy.address)
        wires = [proxy.connections[0] for _, proxy in three_proxied_nsqds]
        await eventually(lambda: sorted(w.last_rdy for w in wires) == [3, 3, 4],
                         message="RDY 4/3/3 for max_in_flight 10")
        # each new connection rebalanced the others: 10, then 5/5, then 4/3/3
        assert wires[0].rdy_counts()[0] == 10 and wires[1].rdy_counts()[0] == 5
        consumer.change_max_in_flight(2)
        await eventually(lambda: sorted(w.last_rdy for w in wires) == [0, 1, 1])
    finally:
        await consumer.stop()


async def test_rdy_moves_between_nsqds_when_max_in_flight_is_below_the_connection_count(
        three_proxied_nsqds: list[tuple[Nsqd, RecordingProxy]], topic: str) -> None:
    for index, (nsqd, _) in enumerate(three_proxied_nsqds):
        async with Producer(nsqd.tcp_address) as producer:
            await producer.multi_publish(topic, [b"%d-%d" % (index, i) for i in range(3)])
    got: list[bytes] = []

    async def handler(message: Message) -> None:
        got.append(message.body)

    config = Config(max_in_flight=1, low_rdy_idle_timeout=1, low_rdy_timeout=1,
                    rdy_redistribute_interval=0.05)
    consumer = Consumer(topic, "ch", config, handler=handler)
    try:
        for _, proxy in three_proxied_nsqds:
            await consumer.connect_to_nsqd(proxy.address)
        await eventually(lambda: len(got) == 9, timeout=15, message="all 9 messages from 3 nsqds")
    finally:
        await consumer.stop()
    assert sorted(got) == sorted(b"%d-%d" % (n, i) for n in range(3) for i in range(3))
    wires = [proxy.connections[0] for _, proxy in three_proxied_nsqds]
    for wire in wires:
        counts = wire.rdy_counts()
        assert set(counts) <= {0, 1} and 1 in counts  # every nsqd got its turn, none more than 1
    events = sorted((s.at, i, int(s.params[0])) for i, w in enumerate(wires) for s in w.sent if s.name == "RDY")
    assert max_total_rdy(events) <= 1, events


def max_total_rdy(events: list[tuple[float, int, int]], together: float = 0.05) -> int:
    """The largest sum of RDY counts over connections at any moment, replaying (time,
    connection, count) as the proxies saw them. Commands the client wrote in one go may
    reach different proxies in either order, so a RDY 0 seen within ``together`` seconds
    after a moment counts as already applied at that moment."""
    peak = 0
    for moment, _, _ in events:
        current: dict[int, int] = {}
        for at, conn, count in events:
            if at <= moment or (count == 0 and at - moment <= together):
                current[conn] = count
        peak = max(peak, sum(current.values()))
    return peak


async def test_a_new_connection_during_backoff_stays_at_rdy_0(nsqd_trio: list[Nsqd], topic: str) -> None:
    first, second = nsqd_trio[:2]
    proxy = await RecordingProxy(HOST, second.tcp_port).start()
    failed = asyncio.Event()

    async def handler(message: Message) -> None:
        failed.set()
        raise RuntimeError("fail to enter backoff")

    async with Producer(first.tcp_address) as producer:
        await producer.publish(topic, b"x")
    consumer = Consumer(topic, "ch", Config(max_in_flight=4, backoff_multiplier=5, default_requeue_delay=60),
                        handler=handler)
    try:
        await consumer.connect_to_nsqd(first.tcp_address)
        async with asyncio.timeout(5):
            await failed.wait()
        await eventually(lambda: consumer.stats().messages_requeued == 1)
        await consumer.connect_to_nsqd(proxy.address)  # backoff wait is 10 s: still inside it
        # stopping sends CLS on the new connection after anything connecting sent on it;
        # the proxy sees one connection's commands in order, so once it has CLS it has
        # every RDY the consumer sent there while connecting
        await consumer.stop()
        wire = proxy.connections[0]
        await eventually(lambda: "CLS" in wire.names(), timeout=5, message="CLS on the new connection")
        before_cls = wire.sent[:wire.names().index("CLS")]
        assert "SUB" in [s.name for s in before_cls]
        assert [s.params for s in before_cls if s.name == "RDY" and int(s.params[0]) > 0] == []
    finally:
        await consumer.stop()
        await proxy.close()
