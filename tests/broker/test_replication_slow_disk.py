"""Replicated topics on a slow disk: three nsqds with 3 replicas and --sync-before-ack,
one or two of them run under strace so that every fsync they make waits (``faults.py``). Real
producers publish under load; the checker reads every message back after the owner's
kill -9 and proves every acknowledged one delivered at least once, counting duplicates."""
from __future__ import annotations

import asyncio
import time

import pytest

from tests.broker import faults
from tests.broker.checker import Load, check, produce, read_back
from tests.broker.load import Consumer, Fin, Hold
from tests.broker.replicas import cluster, post  # noqa: F401 (cluster: a fixture)
from tests.servers import wait_for

pytestmark = [pytest.mark.timeout(90),
              pytest.mark.skipif(not faults.strace_available(), reason="needs strace (make test installs it)")]

SLOW_FSYNC = 0.2  # seconds each fsync of the slow node waits


async def sample_lag(c, owner: int, until: asyncio.Event, most: dict[str, int]) -> None:
    """The most frames each backup of ``owner`` was behind, polled until ``until``."""
    deadline = time.monotonic() + 30
    while not until.is_set() and time.monotonic() < deadline:
        for b in (await asyncio.to_thread(c.replication, owner))["backups"]:
            most[b["peer"]] = max(most.get(b["peer"], 0), b["lag_frames"])
        await asyncio.sleep(0.05)  # a polling interval, not a wait for anything


async def load_until_killed(c, owner_i: int, topic: str, tag: str, load: Load, *, kill_after: int,
                            producers: int = 2, batch: int = 10) -> None:
    """Producers on the owner; kill -9 of the owner once ``kill_after`` messages are
    acknowledged, with publishes in the air."""
    stop = asyncio.Event()
    owner = c.nodes[owner_i]
    tasks = [asyncio.create_task(produce(owner.tcp_address, topic, f"{tag}{p}", load, batches=400, batch=batch,
                                         seconds=15, stop=stop)) for p in range(producers)]
    deadline = time.monotonic() + 15
    while len(load.acked) < kill_after and time.monotonic() < deadline and not all(t.done() for t in tasks):
        await asyncio.sleep(0.01)  # polling the producers' count, bounded by the deadline
    owner.kill()
    stop.set()
    await asyncio.gather(*tasks)
    assert len(load.acked) >= kill_after, f"only {len(load.acked)} acknowledged before the kill"


@pytest.mark.parametrize("fast_fsyncs", [0, 20], ids=["slow_from_the_start", "slow_from_mid_run"])
async def test_a_slow_backup_lags_while_the_fast_one_answers_and_nothing_acknowledged_is_lost(
        cluster, fast_fsyncs: int) -> None:
    # the slow one is the owner's first backup: the one that adopts when the owner dies;
    # with fast_fsyncs its disk turns slow under the load, after that many fsyncs
    c = cluster(3, sync_before_ack="true", wrap={1: faults.slow_fsync(int(SLOW_FSYNC * 1e6), after=fast_fsyncs)})
    owner, slow, fast = c.nodes
    post(owner, "/topic/create?topic=orders")
    post(owner, "/channel/create?topic=orders&channel=billing")

    # 1. under load, publishes are answered at the fast backup's pace; the slow one lags
    load, done, most = Load(), asyncio.Event(), {}
    sampler = asyncio.create_task(sample_lag(c, 0, done, most))
    await asyncio.gather(*[produce(owner.tcp_address, "orders", f"a{p}", load, batches=60, batch=10, seconds=8)
                           for p in range(2)])
    done.set()
    await sampler
    assert not load.failed, load.errors
    assert load.latency(0.5) < SLOW_FSYNC / 2, f"p50 {load.latency(0.5):.3f}s: the slow fsync was waited for"
    assert most[c.peers[1]] > max(2, most[c.peers[2]]), f"the slow backup did not show as lagging: {most}"
    # 2. it catches up once the load stops
    wait_for(lambda: all(b["lag_frames"] == 0 and b["state"] == "in_sync" for b in c.replication(0)["backups"]),
             10, message="the slow backup caught up")
    assert c.replication(1)["held_copies"][c.peers[0]] == len(load.acked)
    print(f"\nslow backup: {len(load.acked)} acknowledged, p50 {load.latency(0.5) * 1000:.1f} ms, "
          f"p99 {load.latency(0.99) * 1000:.1f} ms, most frames behind: slow {most[c.peers[1]]}, "
          f"fast {most[c.peers[2]]}")

    # 3. a consumer on the owner that finishes all but the last 50 it gets (held in flight),
    # more load, and kill -9 of the owner while the slow backup lags again: the adopter
    # (the slow one) pulls what the fast one holds and delivers what is left
    decisions = iter([Fin] * (len(load.acked) + 200))
    consumer = await Consumer(owner.tcp_address, "orders", "billing", rdy=50,
                              decide=lambda d: next(decisions, Hold)).start()
    await load_until_killed(c, 0, "orders", "b", load, kill_after=len(load.acked) + 600)
    delivered = await read_back([slow.tcp_address], "orders", "billing", set(load.acked), consumers=[consumer])
    report = check(load.acked, delivered, load.failed)
    print(f"slow backup, owner killed: {report}")
    assert not report.lost, f"{len(report.lost)} acknowledged messages lost"
    assert c.replication(1)["adopted"].get(c.peers[0], 0) >= len(load.acked) - len(consumer.finished)
    assert report.duplicates <= 50  # at most the messages held in flight at the kill


async def test_a_backup_whose_disk_is_slow_for_a_while_catches_up_under_load_and_nothing_is_lost(cluster) -> None:
    # the owner's first backup: fast for its first 20 fsyncs, each of the next 25 waits
    # SLOW_FSYNC (about 5 s of a slow disk), then fast again
    c = cluster(3, sync_before_ack="true",
                wrap={1: faults.slow_fsync(int(SLOW_FSYNC * 1e6), after=20, lasting=25)})
    owner, slow, _ = c.nodes
    post(owner, "/topic/create?topic=orders")
    post(owner, "/channel/create?topic=orders&channel=billing")
    load, stop = Load(), asyncio.Event()
    producers = [asyncio.create_task(produce(owner.tcp_address, "orders", f"a{p}", load, batches=100_000,
                                             batch=10, seconds=40, stop=stop)) for p in range(2)]
    try:
        # 1. the disk turns slow: the backup falls behind the fast one, publishes go on
        lag = {}
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not (lag.get(c.peers[1], 0) > max(2, lag.get(c.peers[2], 0))):
            for b in (await asyncio.to_thread(c.replication, 0))["backups"]:
                lag[b["peer"]] = max(lag.get(b["peer"], 0), b["lag_frames"])
            await asyncio.sleep(0.05)  # a polling interval, bounded by the deadline
        assert lag.get(c.peers[1], 0) > max(2, lag.get(c.peers[2], 0)), f"the backup never fell behind: {lag}"
        slow_at = len(load.acked)
        # 2. fast again while the load goes on: in sync, at most 2 frames behind, in 10
        # samples in a row (a slow fsync leaves it further behind at every publish)
        in_a_row, deadline = 0, time.monotonic() + 30
        while in_a_row < 10 and time.monotonic() < deadline:
            assert not all(p.done() for p in producers), "the load ended before the backup caught up"
            b = next(b for b in (await asyncio.to_thread(c.replication, 0))["backups"] if b["peer"] == c.peers[1])
            in_a_row = in_a_row + 1 if b["state"] == "in_sync" and b["lag_frames"] <= 2 else 0
            await asyncio.sleep(0.05)  # a polling interval, bounded by the deadline
        assert in_a_row == 10, "the backup did not catch up under load once its disk was fast again"
        assert len(load.acked) > slow_at, "nothing was acknowledged while the backup was slow and after"
    finally:
        stop.set()
        await asyncio.gather(*producers)
    assert not load.failed, load.errors
    wait_for(lambda: c.replication(1)["held_copies"].get(c.peers[0]) == len(load.acked), 10,
             message="the once slow backup holds every acknowledged message")

    # 3. kill -9 of the owner under load: the once slow backup adopts, nothing acknowledged is lost
    await load_until_killed(c, 0, "orders", "b", load, kill_after=len(load.acked) + 300)
    delivered = await read_back([slow.tcp_address], "orders", "billing", set(load.acked))
    report = check(load.acked, delivered, load.failed)
    print(f"\nslow for a while, then fast: {report}")
    assert not report.lost, f"{len(report.lost)} acknowledged messages lost"


async def test_a_slow_owner_answers_after_its_fsync_and_its_kill_9_loses_nothing(cluster) -> None:
    c = cluster(3, sync_before_ack="true", wrap={0: faults.slow_fsync(int(SLOW_FSYNC / 2 * 1e6))})
    owner, adopter, _ = c.nodes
    post(owner, "/topic/create?topic=orders")
    post(owner, "/channel/create?topic=orders&channel=billing")
    decisions = iter([Fin] * 200)  # then 50 held in flight at the kill, the rest left for the adopter
    consumer = await Consumer(owner.tcp_address, "orders", "billing", rdy=50,
                              decide=lambda d: next(decisions, Hold)).start()
    load = Load()
    await load_until_killed(c, 0, "orders", "s", load, kill_after=400, producers=4, batch=25)
    # --sync-before-ack: an OK waits for the owner's own (slow) fsyncs
    assert load.latency(0.5) >= SLOW_FSYNC / 2 * 0.9, f"p50 {load.latency(0.5):.3f}s"
    delivered = await read_back([adopter.tcp_address], "orders", "billing", set(load.acked), consumers=[consumer])
    report = check(load.acked, delivered, load.failed)
    print(f"\nslow owner killed: {report}, p50 {load.latency(0.5) * 1000:.0f} ms")
    assert not report.lost, f"{len(report.lost)} acknowledged messages lost"
    assert report.duplicates <= 50


async def test_both_backups_on_slow_disks_slow_the_publishes_and_the_owners_kill_9_loses_nothing(cluster) -> None:
    # several nodes' disks slow at once: no quorum is had without a slow fsync, so every
    # OK waits for one (none fails: --replication-timeout is 2 s), and the adopter,
    # slow too, pulls from the other slow one
    slow = faults.slow_fsync(int(SLOW_FSYNC * 1e6))
    c = cluster(3, sync_before_ack="true", wrap={1: slow, 2: slow})
    owner, adopter, _ = c.nodes
    post(owner, "/topic/create?topic=orders")
    post(owner, "/channel/create?topic=orders&channel=billing")
    load = Load()
    await asyncio.gather(*[produce(owner.tcp_address, "orders", f"a{p}", load, batches=15, batch=10, seconds=8)
                           for p in range(2)])
    assert not load.failed, load.errors
    assert load.latency(0.5) >= SLOW_FSYNC * 0.9, f"p50 {load.latency(0.5):.3f}s: a slow fsync was not waited for"
    await load_until_killed(c, 0, "orders", "b", load, kill_after=len(load.acked) + 100)
    delivered = await read_back([adopter.tcp_address], "orders", "billing", set(load.acked))
    report = check(load.acked, delivered, load.failed)
    print(f"\nboth backups slow, owner killed: {report}, p50 {load.latency(0.5) * 1000:.0f} ms")
    assert not report.lost, f"{len(report.lost)} acknowledged messages lost"
