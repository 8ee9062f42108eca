"""Graceful shutdown: on SIGTERM nsqd writes every message it holds (queued in memory, in
flight, deferred) to disk, exits 0, and delivers all of them after a restart on the same
--data-path: in-flight ones as undelivered with their attempts count, deferred ones after
their remaining delay."""
from __future__ import annotations

import asyncio
import signal
import time

import pytest

from tests.broker.load import Consumer, Delivery, Fin, Hold, dpub, publish
from tests.servers import Nsqd, http

# a deferred message may arrive this much before its due time: nsqd stores due times in
# milliseconds and the test's clock reading is not nsqd's
EARLY_TOLERANCE = 0.05


def post(nsqd: Nsqd, path: str) -> None:
    status, body = http("POST", nsqd.url(path))
    assert status == 200, (path, status, body)


def stop_cleanly(nsqd: Nsqd, sig: int = signal.SIGTERM) -> None:
    assert nsqd.proc is not None
    nsqd.signal(sig)
    assert nsqd.proc.wait(30) == 0, nsqd.log()
    nsqd.proc = None


@pytest.mark.timeout(60)
async def test_deferred_message_keeps_its_remaining_delay(servers) -> None:
    nsqd = servers.nsqd()
    post(nsqd, "/topic/create?topic=jobs")
    post(nsqd, "/channel/create?topic=jobs&channel=run")
    sent_at = time.time()
    await dpub(nsqd.tcp_address, "jobs", 3000, [b"later"])
    stop_cleanly(nsqd)
    nsqd.start()

    consumer = await Consumer(nsqd.tcp_address, "jobs", "run").start()
    await consumer.wait_until(lambda: bool(consumer.deliveries), 10, "deferred message delivered")
    await consumer.stop()
    [delivery] = consumer.deliveries
    assert delivery.body == b"later" and delivery.attempts == 1
    assert delivery.at >= sent_at + 3.0 - EARLY_TOLERANCE, "delivered before its delay ran out"
    assert delivery.at < sent_at + 3.0 + 5.0


@pytest.mark.timeout(60)
async def test_deferred_message_waiting_in_a_topic_without_channels_keeps_its_delay(servers) -> None:
    nsqd = servers.nsqd(mem_queue_size=1)  # the second one overflows to the topic's disk queue
    post(nsqd, "/topic/create?topic=jobs")
    sent_at = time.time()
    await dpub(nsqd.tcp_address, "jobs", 3000, [b"later-1", b"later-2"])
    stop_cleanly(nsqd)
    nsqd.start()

    consumer = await Consumer(nsqd.tcp_address, "jobs", "run").start()  # creates the channel
    await consumer.wait_until(lambda: len(consumer.deliveries) >= 2, 10, "deferred messages delivered")
    await consumer.stop()
    assert sorted(d.body for d in consumer.deliveries) == [b"later-1", b"later-2"]
    for d in consumer.deliveries:
        assert d.at >= sent_at + 3.0 - EARLY_TOLERANCE, "delivered before its delay ran out"


@pytest.mark.timeout(60)
async def test_in_flight_and_requeued_messages_come_back(servers) -> None:
    nsqd = servers.nsqd()
    post(nsqd, "/topic/create?topic=jobs")
    post(nsqd, "/channel/create?topic=jobs&channel=run")
    bodies = [b"job-%d" % i for i in range(10)]
    await publish(nsqd.tcp_address, "jobs", bodies)

    def requeue_once_then_hold(d: Delivery) -> object:
        return ("req", 0) if d.attempts == 1 and int(d.body.split(b"-")[1]) >= 5 else Hold

    consumer = await Consumer(nsqd.tcp_address, "jobs", "run", rdy=10, decide=requeue_once_then_hold).start()
    await consumer.wait_until(lambda: len(consumer.held) == 10, 10, "all held, five after a REQ")
    await consumer.quiesce()
    stop_cleanly(nsqd, signal.SIGINT)
    await consumer.stop()
    seen_attempts = {}
    for d in consumer.deliveries:
        seen_attempts[d.body] = d.attempts
    nsqd.start()

    after = await Consumer(nsqd.tcp_address, "jobs", "run", rdy=20).start()
    await after.wait_until(lambda: len(after.deliveries) >= 10, 10, "all ten back")
    await after.stop()
    assert sorted(d.body for d in after.deliveries) == sorted(bodies)
    for d in after.deliveries:
        assert d.attempts == seen_attempts.get(d.body, 0) + 1, d


TOPICS = {"orders": ["archive", "billing"], "clicks": ["stats", "audit"], "alerts": ["pager"]}
PAUSED = ("clicks", "audit")  # paused from the start until the very end
PAUSED_TOPIC = ("alerts", {1, 2})  # paused during these lives: messages wait in the topic
TOTAL = 50_000
LIVES = 4  # three restarts
REQ_DELAY_MS = 1500
DPUB_DELAY_MS = 2000
HOLD_LIMIT = 60  # messages each consumer keeps in flight at each shutdown


class ChannelRecord:
    """What one channel's consumers saw across all lives of nsqd."""

    def __init__(self, topic: str, name: str) -> None:
        self.topic, self.name = topic, name
        self.deliveries: list[Delivery] = []
        self.seen: set[bytes] = set()
        self.due_after_req: dict[bytes, float] = {}  # body -> earliest redelivery

    def record(self, d: Delivery) -> None:
        self.deliveries.append(d)
        self.seen.add(d.body)

    def fin_all(self, d: Delivery) -> object:
        self.record(d)
        return Fin


class Decider:
    """FIN most, hold some in flight (never FINed in this life), REQ some with a delay."""

    def __init__(self, channel: ChannelRecord) -> None:
        self.channel = channel
        self.held = 0
        self.count = 0

    def __call__(self, d: Delivery) -> object:
        self.channel.record(d)
        self.count += 1
        if self.count % 97 == 0 and self.held < HOLD_LIMIT:
            self.held += 1
            return Hold
        if self.count % 89 == 0 and d.attempts == 1:
            self.channel.due_after_req[d.body] = d.at + REQ_DELAY_MS / 1000
            return ("req", REQ_DELAY_MS)
        return Fin


@pytest.mark.slow
@pytest.mark.timeout(240)
async def test_every_message_survives_three_restarts(servers) -> None:
    nsqd = servers.nsqd(mem_queue_size=2000)
    for topic, channels in TOPICS.items():
        post(nsqd, f"/topic/create?topic={topic}")
        for channel in channels:
            post(nsqd, f"/channel/create?topic={topic}&channel={channel}")
    post(nsqd, f"/channel/pause?topic={PAUSED[0]}&channel={PAUSED[1]}")

    records = {(t, c): ChannelRecord(t, c) for t, cs in TOPICS.items() for c in cs}
    published: dict[str, list[bytes]] = {t: [] for t in TOPICS}
    deferred_due: dict[bytes, float] = {}
    per_topic = TOTAL // LIVES // len(TOPICS)

    for life in range(LIVES):
        topic_paused = life in PAUSED_TOPIC[1]
        alerts = nsqd.topic(PAUSED_TOPIC[0])
        assert alerts is not None and alerts["paused"] == (life - 1 in PAUSED_TOPIC[1]), "pause not kept"
        post(nsqd, f"/topic/{'pause' if topic_paused else 'unpause'}?topic={PAUSED_TOPIC[0]}")
        shares = {t: [b"%s-%d-%06d" % (t.encode(), life, i) for i in range(per_topic)] for t in TOPICS}
        results = await asyncio.gather(*(publish(nsqd.tcp_address, t, bodies, batch=250)
                                         for t, bodies in shares.items()))
        for (topic, bodies), result in zip(shares.items(), results):
            assert result.acked == bodies
            published[topic] += bodies
        late = [b"alerts-late-%d-%02d" % (life, i) for i in range(20)]
        sent_at = time.time()
        assert await dpub(nsqd.tcp_address, "alerts", DPUB_DELAY_MS, late) == late
        published["alerts"] += late
        deferred_due.update({body: sent_at + DPUB_DELAY_MS / 1000 for body in late})

        # consume part of it; the rest stays queued, in memory and on disk
        consumers = [await Consumer(nsqd.tcp_address, t, c, rdy=300, decide=Decider(record)).start()
                     for (t, c), record in records.items() if (t, c) != PAUSED]
        for consumer in consumers:
            if topic_paused and consumer.topic == PAUSED_TOPIC[0]:
                continue
            record = records[consumer.topic, consumer.channel]
            target = len(published[consumer.topic]) * 6 // 10
            await consumer.wait_until(lambda r=record, c=consumer, n=target: len(r.seen) >= n and bool(c.held),
                                      60, f"life {life}: 60% delivered, some held")
        for consumer in consumers:
            await consumer.quiesce()
        stop_cleanly(nsqd)
        for consumer in consumers:
            await consumer.stop()
        nsqd.start()

    post(nsqd, f"/channel/unpause?topic={PAUSED[0]}&channel={PAUSED[1]}")
    consumers = [await Consumer(nsqd.tcp_address, t, c, rdy=500, decide=record.fin_all).start()
                 for (t, c), record in records.items()]
    for consumer in consumers:
        record = records[consumer.topic, consumer.channel]
        want = set(published[consumer.topic])
        await consumer.wait_until(lambda r=record, w=want: w <= r.seen, 90, "every published message delivered")
    for consumer in consumers:
        await consumer.stop()

    for (topic, name), record in records.items():
        missing = set(published[topic]) - record.seen
        assert not missing, f"{topic}/{name}: {len(missing)} published messages never delivered"
        assert record.seen <= set(published[topic])
        last_attempts: dict[bytes, int] = {}
        for d in record.deliveries:
            # held (in flight at a shutdown) or REQ'd: back as undelivered with its attempts
            assert d.attempts == last_attempts.get(d.body, 0) + 1, f"{topic}/{name}: {d}"
            last_attempts[d.body] = d.attempts
            if d.body in deferred_due:
                assert d.at >= deferred_due[d.body] - EARLY_TOLERANCE, f"{d.body!r} delivered early"
            if d.attempts > 1 and d.body in record.due_after_req:
                assert d.at >= record.due_after_req[d.body] - EARLY_TOLERANCE, f"{d.body!r} REQ delay cut short"
    assert nsqd.stop() == 0
