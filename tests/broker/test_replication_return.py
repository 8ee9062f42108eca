"""Replicated topics after a failover, with real nsqd processes: an owner that comes back
with its disk after its messages were adopted does not deliver them a second time, and
what it publishes afterwards is replicated and adopted as before; a backup that comes
back with its data directory deleted is sent a snapshot of every live message, so the
owner's later loss loses nothing, however small the resend buffer."""
from __future__ import annotations

import shutil

import pytest

from tests.broker.load import Consumer, Fin, Hold, finish_then_hold, publish
from tests.broker.replicas import cluster, post  # noqa: F401 (cluster: a fixture)
from tests.servers import wait_for

pytestmark = pytest.mark.timeout(120)


async def test_an_owner_back_after_its_adoption_does_not_deliver_its_old_queue(cluster) -> None:
    c = cluster(3, sync_before_ack="true")
    owner, adopter, other = c.nodes
    post(owner, "/topic/create?topic=orders")
    post(owner, "/channel/create?topic=orders&channel=billing")
    bodies = [b"old-%04d" % i for i in range(1000)]
    assert (await publish(owner.tcp_address, "orders", bodies, batch=50)).acked == bodies

    # 300 finished and 40 in flight when the owner dies: those 40 are the in-flight window
    first = await finish_then_hold(owner.tcp_address, "orders", "billing", 300, 40)
    c.wait_backups_hold(700)
    owner.kill()
    await first.stop()

    wait_for(lambda: c.replication(1)["adopted"].get(c.peers[0]) == 700, 15, message="the adoption")
    # the adopter's own backups hold what it adopted; the other backup dropped the lost owner's copies
    wait_for(lambda: c.replication(2)["held_copies"] == {c.peers[1]: 700}, 10,
             message="the adopted messages re-replicated, the lost owner's copies dropped")

    owner.start()  # with its data directory: 660 messages still queued there
    stats = c.replication(0)
    assert stats["generation"] == 2, stats
    channel = owner.channel("orders", "billing")
    assert channel is not None and channel["depth"] == 0 and channel["in_flight_count"] == 0, channel

    back = await Consumer(owner.tcp_address, "orders", "billing", rdy=200).start()
    adopted = await Consumer(adopter.tcp_address, "orders", "billing", rdy=200).start()
    want = set(bodies) - set(first.finished)
    await adopted.wait_until(lambda: want <= adopted.bodies(), 30, "the adopted messages")

    # the new generation is replicated and adopted as before
    new = [b"new-%03d" % i for i in range(100)]
    await back.quiesce()  # RDY 0: they stay queued on the owner
    assert (await publish(owner.tcp_address, "orders", new, batch=20)).acked == new
    wait_for(lambda: c.replication(1)["held_copies"].get(c.peers[0]) == 100, 10, message="copies of the new generation")
    owner.kill()
    await back.stop()
    await adopted.wait_until(lambda: set(new) <= adopted.bodies(), 30, "the new generation adopted")
    await adopted.quiesce()
    await adopted.stop()

    assert back.deliveries == [], "the returned owner delivered adopted messages again"
    assert len(adopted.deliveries) == len(want) + len(new), "duplicates from the adopter"
    delivered = len(first.deliveries) + len(back.deliveries) + len(adopted.deliveries)
    assert delivered == len(bodies) + len(new) + 40  # acknowledged, plus the in-flight window


async def test_a_wiped_backup_is_caught_up_and_its_adoption_loses_nothing(cluster) -> None:
    """Two replicas: the owner's only backup is wiped and comes back; far more was
    published before than the 4 KiB resend buffer holds, so only a snapshot makes it whole."""
    c = cluster(2, replication_buffer_bytes=4096, sync_before_ack="true")
    owner, backup, _ = c.nodes
    post(owner, "/topic/create?topic=orders")
    post(owner, "/channel/create?topic=orders&channel=billing")
    bodies = [b"before-%04d" % i for i in range(600)]
    assert (await publish(owner.tcp_address, "orders", bodies, batch=50)).acked == bodies
    decisions = iter([Fin] * 100)
    consumer = await Consumer(owner.tcp_address, "orders", "billing", rdy=20,
                              decide=lambda d: next(decisions, Hold)).start()
    await consumer.wait_until(lambda: len(consumer.finished) >= 100, 30, "100 finished")
    await consumer.quiesce()
    await consumer.stop()  # what it held goes back to the owner's queue
    wait_for(lambda: c.replication(1)["held_copies"].get(c.peers[0]) == 500, 10, message="the backup's copies")

    connects = c.replication(0)["backups"][0]["connects"]
    backup.kill()
    shutil.rmtree(backup.workdir / "data")
    backup.start()
    wait_for(lambda: (lambda b: b["connects"] > connects and b["state"] == "in_sync")(c.replication(0)["backups"][0]),
             20, message="the backup caught up")
    assert c.replication(1)["held_copies"].get(c.peers[0]) == 500
    after = [b"after-%04d" % i for i in range(100)]
    assert (await publish(owner.tcp_address, "orders", after, batch=20)).acked == after

    owner.kill()
    shutil.rmtree(owner.workdir / "data")
    adopted = await Consumer(backup.tcp_address, "orders", "billing", rdy=200).start()
    want = (set(bodies) - set(consumer.finished)) | set(after)
    await adopted.wait_until(lambda: want <= adopted.bodies(), 30, f"{len(want)} messages delivered by the adopter")
    await adopted.quiesce()
    await adopted.stop()
    assert adopted.bodies() == want, "a finished message came back, or one never published"
    assert len(adopted.deliveries) == len(want), "duplicates"


async def test_an_owner_back_wiped_in_an_older_generation_has_the_copies_of_its_newer_one_adopted(
        cluster) -> None:
    """Two replicas: the owner, adopted once, publishes in generation 2; then it loses its
    data directory while its backup is down, so nobody adopts during its silent start.
    It says HELLO in generation 1 (it knows no better) to a backup holding its
    generation 2: the backup adopts those copies, and the owner learns it."""
    c = cluster(2, sync_before_ack="true")
    owner, backup, _ = c.nodes
    post(owner, "/topic/create?topic=orders")
    post(owner, "/channel/create?topic=orders&channel=billing")
    assert (await publish(owner.tcp_address, "orders", [b"first"])).acked == [b"first"]
    owner.kill()
    wait_for(lambda: c.replication(1)["adopted"].get(c.peers[0]) == 1, 15, message="the first adoption")
    owner.start()
    assert c.replication(0)["generation"] == 2

    second = [b"second-%02d" % i for i in range(20)]
    assert (await publish(owner.tcp_address, "orders", second, batch=5)).acked == second
    wait_for(lambda: c.replication(1)["held_copies"].get(c.peers[0]) == 20, 10, message="copies of generation 2")
    assert backup.stop() == 0
    owner.kill()
    shutil.rmtree(owner.workdir / "data")
    owner.start()  # an empty data path: silent, then in generation 1, its backup still down
    assert c.replication(0)["silent"] and c.replication(0)["generation"] == 1
    wait_for(lambda: not c.replication(0)["silent"], 15, message="the owner's silent start over")
    backup.start()  # now its backup hears the owner at once: no loss of it to see

    wait_for(lambda: c.replication(1)["adopted"].get(c.peers[0]) == 20, 20,  # counted since its restart
             message="the backup adopted the copies of the owner's lost generation")
    wait_for(lambda: c.replication(0)["generation"] == 3, 15, message="the owner told of the adoption")
    consumer = await Consumer(backup.tcp_address, "orders", "billing", rdy=50).start()
    await consumer.wait_until(lambda: set(second) <= consumer.bodies(), 20, "generation 2's messages")
    await consumer.quiesce()
    await consumer.stop()
    assert sorted(d.body for d in consumer.deliveries) == second
