"""Replicated topics when a node's clock jumps: three nsqds with 3 replicas and
--sync-before-ack, some run under libfaketime with an offset rewritten mid-run
(``faults.FakeClock``). A wall-clock step (NTP, ``date -s``) forwards and back must not
make anyone lost, nor change when a deferred or in-flight message is due; a monotonic
jump forwards (what a suspended VM sees on resume) must not make the jumping node adopt
peers it simply was not running to hear. Real producers publish throughout; the
checker proves every acknowledged message delivered."""
from __future__ import annotations

import asyncio
import shutil
import time
from pathlib import Path

import pytest

from tests.broker import faults
from tests.broker.checker import Load, check, produce, read_back
from tests.broker.load import Consumer, Fin, Hold, dpub
from tests.broker.replicas import cluster, post  # noqa: F401 (cluster: a fixture)
from tests.servers import wait_for

pytestmark = [pytest.mark.timeout(90),
              pytest.mark.skipif(not faults.faketime_available(), reason="needs faketime (make test installs it)")]

HOUR = 3600
HELD = b"held-000000-00"  # produce's first body of tag "held"


def no_adoption(c, seconds: float) -> None:
    """Nobody adopts anything for ``seconds`` (several failover timeouts)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for i in range(3):
            assert c.replication(i)["adopted"] == {}, f"nsqd {i} adopted: {c.replication(i)['adopted']}"
        time.sleep(0.1)  # polling for the absence of an event over a bounded window


async def test_a_wall_clock_jump_forwards_and_back_changes_no_liveness_and_no_due_time(cluster, tmp_path: Path) -> None:
    clocks = {i: faults.FakeClock(tmp_path / f"clock{i}", monotonic=False) for i in (0, 1)}
    # a failover timeout of 2 s: the loaded nsqds here stall up to a second
    # at times, which a 1 s timeout takes for a loss (rightly); a liveness measured on the
    # wall clock would see an hour of silence at once
    c = cluster(3, sync_before_ack="true", replication_failover_timeout="2s",
                wrap={i: clock.prefix() for i, clock in clocks.items()})
    owner, backup, _ = c.nodes
    post(owner, "/topic/create?topic=orders")
    post(owner, "/channel/create?topic=orders&channel=billing")
    # one message held in flight (2 s timeout), three deferred 3 s, then load throughout
    assert await produce_one(owner, "held") == HELD
    first = iter([Hold])
    consumer = await Consumer(owner.tcp_address, "orders", "billing", rdy=100, msg_timeout_ms=2000,
                              decide=lambda d: next(first, Fin)).start()
    await consumer.wait_until(lambda: len(consumer.deliveries) >= 1, 10, "the held message")
    held_at = consumer.deliveries[0].at
    deferred_at = time.time()
    later = [b"later-%d" % i for i in range(3)]
    assert await dpub(owner.tcp_address, "orders", 3000, later) == later

    load = Load()
    producers = [asyncio.create_task(produce(owner.tcp_address, "orders", f"w{p}", load, batches=150, batch=10,
                                             seconds=8)) for p in range(2)]
    for clock in clocks.values():
        clock.jump(HOUR)
    for i, clock in clocks.items():
        await asyncio.to_thread(faults.wait_clock_seen, c.nodes[i], clock)
    await asyncio.to_thread(no_adoption, c, 2.0)  # an hour ahead
    for clock in clocks.values():
        clock.jump(-2 * HOUR)  # an hour behind real time
    for i, clock in clocks.items():
        await asyncio.to_thread(faults.wait_clock_seen, c.nodes[i], clock)
    await asyncio.to_thread(no_adoption, c, 2.0)
    await asyncio.gather(*producers)
    assert not load.failed, load.errors

    # due times are kept on the monotonic clock: neither an hour late nor at once
    deliveries = {}
    await consumer.wait_until(lambda: set(later) <= consumer.bodies() and
                              sum(d.body == HELD for d in consumer.deliveries) >= 2, 15, "due messages")
    for d in consumer.deliveries:
        deliveries.setdefault(d.body, []).append(d.at)
    assert deferred_at + 3 - 0.1 <= min(deliveries[b] [0] for b in later) <= deferred_at + 3 + 3
    assert held_at + 2 - 0.1 <= deliveries[HELD][1] <= held_at + 2 + 3
    delivered = await read_back([], "orders", "billing", set(load.acked), consumers=[consumer])
    report = check([*load.acked, *later, HELD], delivered, load.failed)
    print(f"\nwall clock +1h then -1h: {report}")
    assert not report.lost
    assert report.duplicates == 1  # the held message, after its timeout


async def produce_one(node, tag: str) -> bytes | None:
    load = Load()
    await produce(node.tcp_address, "orders", tag, load, batches=1, batch=1)
    return load.acked[0] if load.acked else None


async def test_a_monotonic_jump_forwards_does_not_make_the_jumping_node_adopt_live_peers(cluster, tmp_path: Path) -> None:
    """A VM suspended for an hour resumes with its monotonic clock an hour on: its peers
    were alive all along, it only did not listen. Its first tick must not call them lost."""
    clock = faults.FakeClock(tmp_path / "clock1", monotonic=True)
    c = cluster(3, sync_before_ack="true", replication_failover_timeout="2s", wrap={1: clock.prefix()})
    owner, jumper, _ = c.nodes
    post(owner, "/topic/create?topic=orders")
    post(owner, "/channel/create?topic=orders&channel=billing")
    load = Load()
    producers = [asyncio.create_task(produce(owner.tcp_address, "orders", f"m{p}", load, batches=80, batch=10,
                                             seconds=5)) for p in range(2)]
    await asyncio.to_thread(wait_for, lambda: len(load.acked) >= 200, 10, message="load under way")
    clock.jump(HOUR)  # nsqd 1, the owner's first backup (its adopter), resumes an hour later
    await asyncio.to_thread(faults.wait_clock_seen, jumper, clock)
    await asyncio.to_thread(no_adoption, c, 3.0)  # longer than a failover timeout after the jump
    await asyncio.gather(*producers)
    delivered = await read_back([owner.tcp_address], "orders", "billing", set(load.acked))
    report = check(load.acked, delivered, load.failed)
    print(f"\nmonotonic clock +1h on the first backup: {report}, failed publishes {len(load.failed)}")
    assert not report.lost


async def test_an_adopter_keeps_due_times_when_the_lost_owners_clock_was_an_hour_off(
        cluster, tmp_path: Path) -> None:
    """Due times travel in the owner's wall clock; its backups learn from its PINGs how far
    that clock is from theirs, and an adopter delays what it takes over by what was left
    in the owner's time, not in its own."""
    clock = faults.FakeClock(tmp_path / "clock0", monotonic=False)
    clock.jump(HOUR)  # the owner's clock an hour ahead from its start
    c = cluster(3, wrap={0: clock.prefix()})
    owner, adopter, _ = c.nodes
    await asyncio.to_thread(faults.wait_clock_seen, owner, clock)
    await asyncio.to_thread(wait_for, lambda: abs(c.replication(1)["clock_offsets_ms"].get(c.peers[0], 0)
                                                   + HOUR * 1000) < 2000, 10,
                            message="the adopter measured the owner's clock an hour ahead")
    post(owner, "/topic/create?topic=orders")
    post(owner, "/channel/create?topic=orders&channel=billing")
    # one message requeued with a 6 s delay by a consumer of the owner, three deferred 6 s
    assert await produce_one(owner, "req") == b"req-000000-00"
    first = iter([("req", 6000)])
    consumer = await Consumer(owner.tcp_address, "orders", "billing", rdy=10,
                              decide=lambda d: next(first, Hold)).start()
    await consumer.wait_until(lambda: len(consumer.deliveries) >= 1, 10, "the message to requeue")
    await consumer.quiesce()
    requeued_at = consumer.deliveries[0].at
    await consumer.stop()
    deferred_at = time.time()
    later = [b"later-%d" % i for i in range(3)]
    assert await dpub(owner.tcp_address, "orders", 6000, later) == later
    await asyncio.to_thread(wait_for, lambda: c.replication(1)["held_copies"].get(c.peers[0]) == 4, 10,
                            message="the adopter holds the four copies")

    owner.kill()
    shutil.rmtree(owner.workdir / "data")
    after = await Consumer(adopter.tcp_address, "orders", "billing", rdy=10).start()
    await after.wait_until(lambda: {*later, b"req-000000-00"} <= after.bodies(), 20, "the deferred messages")
    await after.stop()
    at = {d.body: d.at for d in after.deliveries}
    assert c.replication(1)["adopted"] == {c.peers[0]: 4}
    # neither an hour late nor at the adoption (2-3 s after the kill): when they were due
    assert all(deferred_at + 6 - 0.2 <= at[body] <= deferred_at + 6 + 2 for body in later), (deferred_at, at)
    assert requeued_at + 6 - 0.2 <= at[b"req-000000-00"] <= requeued_at + 6 + 2, (requeued_at, at)
