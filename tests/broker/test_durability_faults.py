"""Fault test for durable mode: publishers and consumers under load while nsqd is killed
with SIGKILL at random moments and restarted on the same data directory, again and again.
At the end every acknowledged message has been delivered on every channel at least once.
Duplicates (allowed after a crash) are counted and reported."""
from __future__ import annotations

import asyncio
import random
import time
from collections import Counter
from dataclasses import dataclass, field

import pytest

from nsq_protocol import commands as cmd
from nsq_protocol import decode_message
from tests.broker.load import Disconnected, Refused, V2Connection
from tests.servers import Nsqd, http

KILLS = 12
SECONDS_BETWEEN_KILLS = (0.3, 1.2)
PUBLISHERS = 6
CHANNELS = {"orders": ["archive", "billing"], "clicks": ["stats"]}
DRAIN_TIMEOUT = 20.0


@dataclass
class Ledger:
    acked: dict[str, set[bytes]] = field(default_factory=lambda: {t: set() for t in CHANNELS})
    in_the_air: set[bytes] = field(default_factory=set)  # sent, no answer before the kill
    delivered: dict[tuple[str, str], Counter[bytes]] = field(
        default_factory=lambda: {(t, c): Counter() for t, cs in CHANNELS.items() for c in cs})
    changed: asyncio.Event = field(default_factory=asyncio.Event)


class Cluster:
    """The one nsqd and whether it is up; clients wait for the next restart after losing it."""

    def __init__(self, nsqd: Nsqd) -> None:
        self.nsqd = nsqd
        self.publishing = True
        self.lives = 0  # restarts so far
        self._restarted = asyncio.Condition()

    async def connect(self) -> V2Connection:
        while True:
            life = self.lives
            try:
                return await V2Connection.open(self.nsqd.tcp_address)
            except Disconnected:
                async with self._restarted:
                    await self._restarted.wait_for(lambda: self.lives > life)

    async def restarted(self) -> None:
        async with self._restarted:
            self.lives += 1
            self._restarted.notify_all()


async def publisher(cluster: Cluster, ledger: Ledger, number: int, rng: random.Random) -> None:
    sequence = 0
    while cluster.publishing:
        conn = await cluster.connect()
        try:
            while cluster.publishing:
                topic = rng.choice(list(CHANNELS))
                size = rng.choice((1, 1, 1, 5, 20))
                bodies = [b"p%d-%07d" % (number, sequence + i) for i in range(size)]
                sequence += size
                conn.send(cmd.pub(topic, bodies[0]) if size == 1 else cmd.mpub(topic, bodies))
                ledger.in_the_air.update(bodies)
                await conn.expect_ok(timeout=10)
                ledger.in_the_air.difference_update(bodies)
                ledger.acked[topic].update(bodies)
        except (Disconnected, Refused, asyncio.TimeoutError):
            pass
        finally:
            await conn.close()


async def consumer(cluster: Cluster, ledger: Ledger, topic: str, channel: str, requeue_some: bool) -> None:
    seen = ledger.delivered[topic, channel]
    while True:  # until cancelled
        conn = await cluster.connect()
        try:
            conn.send(cmd.sub(topic, channel))
            await conn.expect_ok()
            conn.send(cmd.rdy(100))
            while True:
                frame = await conn.frame()
                if not frame.is_message:
                    continue
                msg = decode_message(frame.data)
                if requeue_some and msg.attempts == 1 and msg.body[-1:] == b"7":
                    conn.send(cmd.req(msg.id, 0))
                    continue
                seen[msg.body] += 1
                conn.send(cmd.fin(msg.id))
                ledger.changed.set()
        except (Disconnected, Refused, asyncio.TimeoutError):
            pass
        finally:
            await conn.close()


async def killer(cluster: Cluster, rng: random.Random) -> int:
    kills = 0
    for _ in range(KILLS):
        await asyncio.sleep(rng.uniform(*SECONDS_BETWEEN_KILLS))  # a random moment under load
        cluster.nsqd.kill()
        kills += 1
        await asyncio.to_thread(cluster.nsqd.start)
        await cluster.restarted()
    return kills


@pytest.mark.slow
@pytest.mark.timeout(120)
async def test_acknowledged_messages_survive_repeated_kill_9(servers) -> None:
    started = time.monotonic()
    rng = random.Random(20240611)
    nsqd = servers.nsqd(sync_before_ack="true", msg_timeout="5s")
    for topic, channels in CHANNELS.items():
        assert http("POST", nsqd.url(f"/topic/create?topic={topic}"))[0] == 200
        for channel in channels:
            assert http("POST", nsqd.url(f"/channel/create?topic={topic}&channel={channel}"))[0] == 200
    cluster = Cluster(nsqd)
    ledger = Ledger()

    tasks = [asyncio.create_task(publisher(cluster, ledger, n, random.Random(n))) for n in range(PUBLISHERS)]
    tasks += [asyncio.create_task(consumer(cluster, ledger, t, c, requeue_some=(c == "billing")))
              for t, cs in CHANNELS.items() for c in cs]
    kills = await killer(cluster, rng)
    cluster.publishing = False  # consumers keep draining
    await asyncio.gather(*tasks[:PUBLISHERS])

    def all_delivered() -> bool:
        return all(ledger.acked[t] <= ledger.delivered[t, c].keys() for t, cs in CHANNELS.items() for c in cs)

    deadline = time.monotonic() + DRAIN_TIMEOUT
    while not all_delivered() and time.monotonic() < deadline:
        ledger.changed.clear()
        try:
            async with asyncio.timeout(max(0.01, deadline - time.monotonic())):
                await ledger.changed.wait()
        except asyncio.TimeoutError:
            break
    for task in tasks[PUBLISHERS:]:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    assert nsqd.stop() == 0, nsqd.log()

    acked_total = sum(len(bodies) for bodies in ledger.acked.values())
    report = [f"{kills} kills in {time.monotonic() - started:.1f}s, {acked_total} publishes acknowledged, "
              f"{len(ledger.in_the_air)} in the air at a kill"]
    for (topic, channel), seen in ledger.delivered.items():
        missing = ledger.acked[topic] - seen.keys()
        duplicates = sum(n - 1 for n in seen.values())
        report.append(f"{topic}/{channel}: {len(seen)} distinct delivered, {duplicates} duplicate deliveries, "
                      f"{len(missing)} acknowledged but missing")
    print("\n" + "\n".join(report))
    assert kills >= 10
    assert acked_total > 1000, "too little load to mean anything"
    for (topic, channel), seen in ledger.delivered.items():
        missing = ledger.acked[topic] - seen.keys()
        assert not missing, f"{topic}/{channel}: {len(missing)} acknowledged messages lost, e.g. {sorted(missing)[:3]}"
