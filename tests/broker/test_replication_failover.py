"""Replicated topics with real nsqd processes, each on its own loopback address: a
publish is answered only once a quorum holds it, and when the nsqd that took the
publishes is killed with kill -9 and its data directory deleted, the survivors deliver
every acknowledged message, and none that a channel had finished before the kill."""
from __future__ import annotations

import asyncio
import shutil
import time

import pytest

from nsq_protocol.commands import encode_mpub_body
from tests.broker.load import Consumer, Fin, Hold, V2Connection, dpub, finish_then_hold, publish
from tests.broker.replicas import cluster, post  # noqa: F401 (cluster: a fixture)
from tests.servers import http, wait_for

pytestmark = pytest.mark.timeout(90)

async def test_killed_owner_is_replaced_by_a_backup_that_delivers_what_was_not_finished(cluster) -> None:
    c = cluster(3, sync_before_ack="true")
    owner, adopter, other = c.nodes
    post(owner, "/topic/create?topic=orders")
    post(owner, "/channel/create?topic=orders&channel=billing")
    bodies = [b"msg-%05d" % i for i in range(2000)]
    acked = (await publish(owner.tcp_address, "orders", bodies[:1500], batch=50)).acked
    acked += (await publish(owner.tcp_address, "orders", bodies[1500:1600], batch=1)).acked
    post(owner, "/pub?topic=orders", bodies[1600])
    post(owner, "/mpub?topic=orders&binary=true", encode_mpub_body(bodies[1601:]))
    acked += bodies[1600:]
    assert acked == bodies

    # a consumer finishes 600 messages and holds 40 in flight when the owner dies
    consumer = await finish_then_hold(owner.tcp_address, "orders", "billing", 600, 40)
    finished = set(consumer.finished)
    assert len(finished) == 600
    c.wait_backups_hold(2000 - 600)

    owner.kill()
    shutil.rmtree(owner.workdir / "data")
    await consumer.stop()

    after = await Consumer(adopter.tcp_address, "orders", "billing", rdy=200).start()
    want = set(acked) - finished
    await after.wait_until(lambda: want <= after.bodies(), 30, f"{len(want)} messages delivered by the adopter")
    await after.quiesce()
    await after.stop()
    delivered = [d.body for d in after.deliveries]
    assert set(delivered) == want, "a finished message came back, or one never published"
    assert len(delivered) == len(want), f"{len(delivered) - len(want)} duplicates"
    stats = c.replication(1)
    assert stats["adopted"] == {c.peers[0]: 2000 - 600}
    assert c.replication(2)["adopted"] == {}  # the first live backup adopts, the second stands by


async def test_a_publish_acknowledged_the_instant_before_kill_9_is_delivered(cluster) -> None:
    c = cluster(2)
    owner, adopter, _ = c.nodes
    later = [b"later-%d" % i for i in range(5)]
    deferred_at = time.time()
    assert await dpub(owner.tcp_address, "fresh", 4000, later) == later
    bodies = [b"now-%05d" % i for i in range(3000)]
    acked = (await publish(owner.tcp_address, "fresh", bodies, batch=100)).acked
    assert acked == bodies
    owner.kill()  # the instant the last OK arrived; no channel existed: the topic held them
    shutil.rmtree(owner.workdir / "data")
    after = await Consumer(adopter.tcp_address, "fresh", "late", rdy=500).start()
    await after.wait_until(lambda: set(acked + later) <= after.bodies(), 30, "every acknowledged message")
    await after.quiesce()
    await after.stop()
    assert len(after.deliveries) == len(acked) + len(later)
    # a DPUB's copy keeps its due time: the adopter held it back for what was left
    assert min(d.at for d in after.deliveries if d.body in later) >= deferred_at + 4 - 0.1


async def test_without_a_quorum_a_publish_fails_and_with_one_back_it_succeeds(cluster) -> None:
    c = cluster(3)
    owner, first, second = c.nodes
    assert (await publish(owner.tcp_address, "t", [b"before"])).acked == [b"before"]
    first.kill()
    second.kill()
    conn = await V2Connection.open(owner.tcp_address)
    try:
        conn.send(b"PUB t\n" + len(b"alone").to_bytes(4, "big") + b"alone")
        frame = await conn.frame(timeout=10)
        assert frame.is_error and frame.data.startswith(b"E_PUB_FAILED"), frame.data
    finally:
        await conn.close()
    status, answer = http("POST", owner.url("/pub?topic=t"), b"alone-http")
    assert status == 500, (status, answer)

    first.start()  # one backup back: 2 of 3 copies again
    wait_for(lambda: any(b["connected"] for b in c.replication(0)["backups"]), 10, message="a backup back")
    assert (await publish(owner.tcp_address, "t", [b"after"])).acked == [b"after"]


async def test_a_whole_cluster_restart_adopts_nothing(cluster) -> None:
    """The first nsqd back up waits for the others longer than a failover timeout: it
    holds copies of their messages, but they are only booting, not lost."""
    c = cluster(3, replication_failover_timeout="2s")  # lost after 2 s; 10 s at start
    owner, backup, _ = c.nodes
    bodies = [b"kept-%03d" % i for i in range(100)]
    assert (await publish(owner.tcp_address, "kept", bodies, batch=10)).acked == bodies
    for node in c.nodes:
        assert node.stop() == 0
    backup.start()
    assert backup.get_json("/replication")["held_copies"] == {c.peers[0]: 100}
    # well past one failover timeout, within the grace
    deadline = asyncio.get_running_loop().time() + 2.5
    while asyncio.get_running_loop().time() < deadline:
        assert backup.get_json("/replication")["adopted"] == {}
        await asyncio.sleep(0.1)
    owner.start()
    wait_for(lambda: backup.get_json("/replication")["peers"][0]["alive"], 10, message="the owner heard")
    consumer = await Consumer(owner.tcp_address, "kept", "c", rdy=100).start()
    await consumer.wait_until(lambda: set(bodies) <= consumer.bodies(), 20, "the owner's own messages")
    await consumer.quiesce()
    await consumer.stop()
    assert backup.get_json("/replication")["adopted"] == {}
    assert len(consumer.deliveries) == 100


async def test_an_owner_replaced_at_once_with_an_empty_disk_still_has_its_messages_adopted(cluster) -> None:
    """The replacement comes back before its backups called the old one lost: with an
    empty data path it stays silent long enough for them to adopt what they hold."""
    c = cluster(3, replication_failover_timeout="3s")  # longer than a restart takes
    owner, adopter, _ = c.nodes
    bodies = [b"old-%04d" % i for i in range(500)]
    assert (await publish(owner.tcp_address, "orders", bodies, batch=50)).acked == bodies
    owner.kill()
    shutil.rmtree(owner.workdir / "data")
    owner.start()  # within the failover timeout of its last word
    consumer = await Consumer(adopter.tcp_address, "orders", "c", rdy=200).start()
    await consumer.wait_until(lambda: set(bodies) <= consumer.bodies(), 15, "the old owner's messages")
    await consumer.quiesce()
    await consumer.stop()
    assert len(consumer.deliveries) == len(bodies)
    wait_for(lambda: all(b["connected"] for b in c.replication(0)["backups"]), 15, message="the replacement joined")
    assert (await publish(owner.tcp_address, "orders", [b"new"])).acked == [b"new"]


async def test_fins_of_a_consumer_taking_one_message_at_a_time_reach_the_backups(cluster) -> None:
    """A FIN alone in a read from a consumer at RDY 1 has a path of its own in nsqd (the
    next message is written in the same pass): its FINs reach the backups like any other."""
    c = cluster(3)
    owner = c.nodes[0]
    post(owner, "/topic/create?topic=single")
    post(owner, "/channel/create?topic=single&channel=one")
    bodies = [b"one-%03d" % i for i in range(200)]
    assert (await publish(owner.tcp_address, "single", bodies, batch=50)).acked == bodies
    decisions = iter([Fin] * 120 + [Hold])
    consumer = await Consumer(owner.tcp_address, "single", "one", rdy=1,
                              decide=lambda d: next(decisions, Hold)).start()
    await consumer.wait_until(lambda: len(consumer.deliveries) >= 121, 30, "121 deliveries")
    await consumer.quiesce()
    assert len(set(consumer.finished)) == 120
    for i in (1, 2):
        wait_for(lambda: c.replication(i)["held_copies"].get(c.peers[0]) == 200 - 120, 10,
                 message=f"backup {i} was not told of the finished messages")
    await consumer.stop()


async def test_an_owner_killed_and_restarted_at_once_has_what_its_memory_held_adopted(cluster) -> None:
    """Without --sync-before-ack a kill -9 loses the owner's memory queues; restarted at
    once (as kubelet restarts a crashed container) it is never missed by its peers. It
    starts as another life of its data path, so its first backup adopts the copies, and
    it empties what its disk still held of the topic instead of delivering it twice."""
    c = cluster(3, replication_failover_timeout="3s", mem_queue_size=100)
    owner, adopter, other = c.nodes
    post(owner, "/topic/create?topic=orders")
    post(owner, "/channel/create?topic=orders&channel=billing")
    bodies = [b"kept-%04d" % i for i in range(500)]
    assert (await publish(owner.tcp_address, "orders", bodies, batch=50)).acked == bodies
    consumer = await finish_then_hold(owner.tcp_address, "orders", "billing", 100, 20)
    finished = set(consumer.finished)
    c.wait_backups_hold(400)
    await consumer.stop()

    owner.kill()
    owner.start()  # at once: well within the failover timeout of its last ping
    # the restarted owner learns of the adoption before it serves (or, if its backups
    # were slower than its wait for them, empties its topic as soon as it does)
    wait_for(lambda: owner.get_json("/replication")["generation"] == 2, 15, message="the owner moved on")
    assert c.replication(1)["adopted"] == {c.peers[0]: 400}
    consumers = [await Consumer(n.tcp_address, "orders", "billing", rdy=200).start() for n in c.nodes]
    want = set(bodies) - finished
    await consumers[1].wait_until(lambda: want <= consumers[1].bodies(), 20, "the 400 owed, by the adopter")
    for each in consumers:
        await each.quiesce()
        await each.stop()
    delivered = [d.body for each in consumers for d in each.deliveries]
    assert set(delivered) == want
    assert len(delivered) == len(want), f"{len(delivered) - len(want)} delivered twice"
    assert (await publish(owner.tcp_address, "orders", [b"after"])).acked == [b"after"]


async def test_an_owner_stopped_cleanly_and_restarted_is_the_same_life(cluster) -> None:
    """A clean stop writes the memory queues to disk: restarted, the owner is welcomed by
    its backups as the same life (another would be answered nothing until its copies
    were adopted), delivers its messages itself, and nothing is adopted."""
    c = cluster(3, replication_failover_timeout="3s")
    await _restart_delivers_its_own(c, stop=lambda node: node.stop())


async def test_a_durable_owner_killed_and_restarted_at_once_is_the_same_life(cluster) -> None:
    """With --sync-before-ack every acknowledged message was on disk before its OK."""
    c = cluster(3, replication_failover_timeout="3s", sync_before_ack="true")
    await _restart_delivers_its_own(c, stop=lambda node: node.kill())


async def _restart_delivers_its_own(c, stop) -> None:
    owner = c.nodes[0]
    bodies = [b"kept-%03d" % i for i in range(300)]
    assert (await publish(owner.tcp_address, "orders", bodies, batch=20)).acked == bodies
    stop(owner)
    owner.start()
    wait_for(lambda: all(b["state"] == "in_sync" for b in owner.get_json("/replication")["backups"]), 15,
             message="both backups welcomed the owner")
    assert owner.get_json("/replication")["generation"] == 1
    consumer = await Consumer(owner.tcp_address, "orders", "c", rdy=300).start()
    await consumer.wait_until(lambda: set(bodies) <= consumer.bodies(), 20, "the owner's own messages")
    await consumer.quiesce()
    await consumer.stop()
    assert len(consumer.deliveries) == 300
    for i in (1, 2):
        assert c.replication(i)["adopted"] == {}
