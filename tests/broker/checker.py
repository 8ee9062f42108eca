"""Load and checker for fault tests of replicated topics, Jepsen-style: real producers
(our ``nsq_client.Producer``) publish unique bodies under load and record what nsqd
acknowledged; after the fault heals, consumers read everything back and the checker
proves every acknowledged message was delivered at least once, counting duplicates.

Every loop is bounded in count and in time."""
from __future__ import annotations

import asyncio
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Iterable, Sequence

from nsq_client import Producer
from tests.broker.load import Consumer


@dataclass
class Load:
    """What the producers got acknowledged, what failed (refused or in the air when a
    connection broke: may or may not be delivered) and each OK's latency."""
    acked: list[bytes] = field(default_factory=list)
    failed: list[bytes] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)
    latencies: list[float] = field(default_factory=list)  # seconds, per acknowledged batch

    def latency(self, quantile: float) -> float:
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(quantile * len(ordered)))] if ordered else 0.0


async def produce(address: str, topic: str, tag: str, load: Load, *, batches: int, batch: int = 10,
                  seconds: float = 10.0, stop: asyncio.Event | None = None, timeout: float = 10.0) -> None:
    """One producer: up to ``batches`` MPUBs of ``batch`` unique bodies to ``address``,
    for at most ``seconds`` (or until ``stop``), one at a time, each waited for."""
    producer = Producer(address)
    deadline = time.monotonic() + seconds
    try:
        for n in range(batches):
            if time.monotonic() > deadline or (stop is not None and stop.is_set()):
                break
            bodies = [b"%s-%06d-%02d" % (tag.encode(), n, i) for i in range(batch)]
            started = time.monotonic()
            try:
                await asyncio.wait_for(producer.multi_publish(topic, bodies), timeout)
            except Exception as error:  # refused (E_PUB_FAILED), or the connection broke
                load.failed.extend(bodies)
                load.errors[str(error).split(" ", 1)[0][:40] or type(error).__name__] += 1
                await asyncio.sleep(0.05)  # a failing nsqd is not hammered: a pause, not a wait
                continue
            load.latencies.append(time.monotonic() - started)
            load.acked.extend(bodies)
    finally:
        await asyncio.wait_for(producer.stop(), 10)


@dataclass
class Report:
    acknowledged: int
    delivered: int  # distinct acknowledged-or-not bodies delivered
    deliveries: int
    lost: set[bytes]
    duplicates: int  # deliveries beyond the first of each body
    unacknowledged_delivered: int  # failed publishes that were delivered anyway (allowed)

    def __str__(self) -> str:
        return (f"{self.acknowledged} acknowledged, {self.delivered} delivered, {len(self.lost)} lost, "
                f"{self.duplicates} duplicates, {self.unacknowledged_delivered} unacknowledged delivered")


def check(acked: Iterable[bytes], delivered: Counter[bytes], failed: Iterable[bytes] = ()) -> Report:
    acked_set = set(acked)
    failed_set = set(failed)
    stray = set(delivered) - acked_set - failed_set
    assert not stray, f"{len(stray)} delivered bodies were never published, e.g. {sorted(stray)[:3]}"
    return Report(len(acked_set), len(delivered), sum(delivered.values()), acked_set - set(delivered),
                  sum(delivered.values()) - len(delivered), len(set(delivered) & failed_set))


async def read_back(addresses: Sequence[str], topic: str, channel: str, want: set[bytes], *,
                    timeout: float = 30.0, consumers: Sequence[Consumer] = ()) -> Counter[bytes]:
    """A consumer on every address (plus ``consumers`` already running) until every body
    of ``want`` arrived somewhere, or ``timeout``; then all are quiesced and stopped and
    every delivery counted (the checker reports what is missing)."""
    readers = [*consumers, *[await Consumer(a, topic, channel, rdy=500).start() for a in addresses]]
    deadline = time.monotonic() + timeout

    def seen() -> set[bytes]:
        return {d.body for r in readers for d in r.deliveries}
    try:
        while time.monotonic() < deadline:
            for r in readers:
                r._changed.clear()  # before looking: a delivery after the look sets it again
            if want <= seen():
                break
            waits = [asyncio.ensure_future(r._changed.wait()) for r in readers if r.running]
            if not waits:
                break
            _, pending = await asyncio.wait(waits, timeout=max(0.0, deadline - time.monotonic()),
                                            return_when=asyncio.FIRST_COMPLETED)
            for w in pending:
                w.cancel()
        for r in readers:
            if r.running:
                await r.quiesce()
    finally:
        for r in readers:
            await r.stop()
    delivered: Counter[bytes] = Counter()
    for r in readers:
        delivered.update(d.body for d in r.deliveries)
    return delivered
