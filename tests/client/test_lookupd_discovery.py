"""Discovery through a real nsqlookupd: a consumer connects to every nsqd with its topic,
picks up new ones at the next poll and drops those lookupd no longer lists; the producer
pool publishes over every nsqd lookupd knows."""
from __future__ import annotations

import asyncio
import logging
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from nsq_client import Config, Consumer, LookupdAdmin, Message, NsqdNode, Producer, ProducerPool
from nsq_client.lookup import LookupdPoller, nodes_with_topic
from tests.client.conftest import nsqd_starter
from tests.client.helpers import channel_stats, eventually, topic_message_count
from tests.client.http_recorder import RecordingHttpProxy
from tests.conftest import Servers
from tests.servers import Nsqd, Nsqlookupd


def start_with_lookupd(servers: Servers, flavour: str, count: int) -> tuple[Nsqlookupd, list[Nsqd]]:
    """A lookupd and ``count`` nsqds registering with it, all started at once."""
    lookupd = servers.lookupd(start=False)
    start = nsqd_starter(servers, flavour)
    with ThreadPoolExecutor(count + 1) as pool:
        started = pool.submit(lookupd.start)
        nsqds = list(pool.map(lambda _: start(lookupd_tcp_address=lookupd.tcp_address), range(count)))
        started.result()
    return lookupd, nsqds


@pytest.fixture(scope="module")
def lookupd_pair(module_flavour: str, module_servers: Servers) -> tuple[Nsqlookupd, list[Nsqd]]:
    """A lookupd and two nsqds registered with it, shared by the module (unique topics)."""
    return start_with_lookupd(module_servers, module_flavour, 2)


async def registered(lookupd: Nsqlookupd, topic: str, nsqds: list[Nsqd]) -> bool:
    async with LookupdAdmin(lookupd.http_address) as admin:
        try:
            producers = (await admin.lookup(topic))["producers"]
        except Exception:
            return False
    return {p["tcp_port"] for p in producers} == {n.tcp_port for n in nsqds}


async def publish(nsqd: Nsqd, topic: str, body: bytes) -> None:
    async with Producer(nsqd.tcp_address) as producer:
        await producer.publish(topic, body)


async def test_a_consumer_follows_what_lookupd_lists(lookupd_pair: tuple[Nsqlookupd, list[Nsqd]],
                                                     servers: Servers, module_flavour: str, topic: str) -> None:
    lookupd, (first, second) = lookupd_pair
    await publish(first, topic, b"from first")
    await publish(second, topic, b"from second")
    await eventually(lambda: registered(lookupd, topic, [first, second]), message="both registered")

    got: list[bytes] = []

    async def handler(message: Message) -> None:
        got.append(message.body)

    consumer = Consumer(topic, "ch", Config(lookupd_poll_interval=0.2, max_in_flight=10), handler=handler)
    try:
        await consumer.connect_to_lookupd(lookupd.http_address)
        # the first query is answered before connect_to_lookupd returns
        assert sorted(consumer.connections) == sorted([first.tcp_address, second.tcp_address])
        assert consumer.lookupd_addresses == [lookupd.http_address]
        await eventually(lambda: sorted(got) == [b"from first", b"from second"])

        start = nsqd_starter(servers, module_flavour)
        third = await asyncio.to_thread(start, lookupd_tcp_address=lookupd.tcp_address)
        await publish(third, topic, b"from third")
        await eventually(lambda: third.tcp_address in consumer.connections, message="the new nsqd is used")
        await eventually(lambda: b"from third" in got)

        # once lookupd stops listing an nsqd for the topic, the consumer leaves it (CLS)
        async with LookupdAdmin(lookupd.http_address) as admin:
            await admin.tombstone_topic_producer(topic, first.http_address)
        await eventually(lambda: first.tcp_address not in consumer.connections, message="dropped")
        # the consumer forgets a connection once its side is closed; nsqd notices the EOF a
        # little later, so its count is waited on rather than read once
        async def first_has_no_client() -> bool:
            stats = await channel_stats(first, topic, "ch")
            return stats is not None and stats["client_count"] == 0
        await eventually(first_has_no_client, message="the first nsqd counts no client")
        assert sorted(consumer.connections) == sorted([second.tcp_address, third.tcp_address])
    finally:
        await consumer.stop()


async def test_a_consumer_without_a_reachable_lookupd_keeps_its_connections(
        servers: Servers, module_flavour: str, topic: str, caplog: pytest.LogCaptureFixture) -> None:
    lookupd, (nsqd,) = await asyncio.to_thread(start_with_lookupd, servers, module_flavour, 1)
    await publish(nsqd, topic, b"x")
    await eventually(lambda: registered(lookupd, topic, [nsqd]))

    async def handler(message: Message) -> None:
        pass

    consumer = Consumer(topic, "ch", Config(lookupd_poll_interval=0.1), handler=handler)
    try:
        await consumer.connect_to_lookupd(lookupd.http_address)
        assert consumer.connections == [nsqd.tcp_address]
        before = await consumer_addresses(nsqd, topic)
        await asyncio.to_thread(lookupd.stop)
        caplog.set_level(logging.WARNING, logger="nsq_client")
        await eventually(lambda: sum("query failed" in r.getMessage() for r in caplog.records) >= 3,
                         message="three polls against the stopped lookupd")
        assert consumer.connections == [nsqd.tcp_address]
        assert await consumer_addresses(nsqd, topic) == before  # the very same connection
    finally:
        await consumer.stop()


async def consumer_addresses(nsqd: Nsqd, topic: str) -> list[str]:
    stats = await channel_stats(nsqd, topic, "ch")
    assert stats is not None
    return [c["remote_address"] for c in stats["clients"]]


async def test_the_pool_publishes_over_every_nsqd_lookupd_knows(lookupd_pair: tuple[Nsqlookupd, list[Nsqd]],
                                                                 servers: Servers, module_flavour: str,
                                                                 topic: str) -> None:
    lookupd, pair = lookupd_pair
    nsqds = list(pair)

    async def nodes() -> set[int]:
        async with LookupdAdmin(lookupd.http_address) as admin:
            return {n["tcp_port"] for n in await admin.nodes()}

    await eventually(lambda: _equals(nodes(), {n.tcp_port for n in nsqds}), message="nodes registered")
    async with ProducerPool(lookupd_addresses=[lookupd.http_address],
                            config=Config(lookupd_poll_interval=0.2)) as pool:
        assert set(pool.nodes) == {n.tcp_address for n in nsqds}
        for i in range(10):
            await pool.publish(topic, b"%d" % i)
        assert [await topic_message_count(n, topic) for n in nsqds] == [5, 5]

        start = nsqd_starter(servers, module_flavour)
        nsqds.append(await asyncio.to_thread(start, lookupd_tcp_address=lookupd.tcp_address))
        await eventually(lambda: len(pool.nodes) == 3, message="the pool found the third nsqd")
        for i in range(9):
            await pool.publish(topic, b"%d" % i)
        assert await topic_message_count(nsqds[2], topic) == 3

    # without connect(), the first publishes wait for discovery's first answer
    lazy = ProducerPool(lookupd_addresses=[lookupd.http_address])
    try:
        await asyncio.gather(*(lazy.publish(topic, b"lazy %d" % i) for i in range(6)))
        assert len(lazy.nodes) == 3
    finally:
        await lazy.stop()
    assert sum([await topic_message_count(n, topic) for n in nsqds]) == 10 + 9 + 6


async def _equals(value: "asyncio.Future[set[int]] | object", expected: set[int]) -> bool:
    return await value == expected  # type: ignore[misc]


async def test_polls_follow_the_interval_after_a_random_start_offset(
        lookupd_pair: tuple[Nsqlookupd, list[Nsqd]], topic: str) -> None:
    lookupd, _ = lookupd_pair
    interval = 0.2
    config = Config(lookupd_poll_interval=interval, lookupd_poll_jitter=1.0)
    rounds: list[list[float]] = [[] for _ in range(4)]
    pollers = []
    for times in rounds:
        async def discover(admin: LookupdAdmin, times: list[float] = times) -> list[NsqdNode]:
            times.append(time.monotonic())
            return await nodes_with_topic(admin, topic)
        poller = LookupdPoller(config, discover, lambda nodes: None)
        poller.add(lookupd.http_address)
        poller.start()
        pollers.append(poller)
    try:
        await eventually(lambda: all(len(t) >= 3 for t in rounds), timeout=5, message="three rounds each")
    finally:
        for poller in pollers:
            await poller.close()
    offsets = []
    for times in rounds:
        first_gap, second_gap = times[1] - times[0], times[2] - times[1]
        assert interval * 0.95 <= first_gap <= 2 * interval + 0.1  # interval plus up to one interval
        assert interval * 0.95 <= second_gap <= interval + 0.1
        offsets.append(first_gap - interval)
    assert max(offsets) - min(offsets) > 0.01  # the pollers did not start in step


async def test_lookupd_is_queried_once_at_start_then_after_the_offset_and_the_interval(
        lookupd_pair: tuple[Nsqlookupd, list[Nsqd]], topic: str) -> None:
    """As go-nsq does: one query when connecting, then the random start offset (up to
    jitter x interval), then one query every interval; never a second query at once."""
    lookupd, _ = lookupd_pair
    interval, jitter = 0.3, 0.5
    config = Config(lookupd_poll_interval=interval, lookupd_poll_jitter=jitter)
    proxy = await RecordingHttpProxy(lookupd.http_address).start()

    async def handler(message: Message) -> None:
        pass

    consumer = Consumer(topic, "ch", config, handler=handler)
    pool = ProducerPool(lookupd_addresses=[proxy.address], config=config)
    try:
        await consumer.connect_to_lookupd(proxy.address)  # the consumer asks /lookup
        await pool.connect()  # the pool asks /nodes
        await eventually(lambda: len(proxy.times("/lookup")) >= 3 and len(proxy.times("/nodes")) >= 3,
                         timeout=5, message="three queries from each")
    finally:
        await consumer.stop()
        await pool.stop()
        await proxy.close()
    for path in ("/lookup", "/nodes"):
        first, second, third = proxy.times(path)[:3]
        assert interval * 0.95 <= second - first <= interval * (1 + jitter) + 0.2, (path, second - first)
        assert interval * 0.95 <= third - second <= interval + 0.2, (path, third - second)
