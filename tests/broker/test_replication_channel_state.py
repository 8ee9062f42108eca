"""The channels' state beyond FIN reaches the backups, so that after a failover the
adopter reproduces it: what the owner emptied or deleted is not delivered again, what
it paused stays paused, and a message it requeued with a delay waits for its due time.

Three real nsqd processes (``replicas.py``); the owner is killed with kill -9 and its
first live backup adopts. A message published after each change is the marker that the
backups applied it: frames go to a backup in order, so a backup holding the marker's
copy holds the change, and the adopter puts the copies on its channels in the order
they were published, the marker last."""
from __future__ import annotations

import json
import time

import pytest

from tests.broker.load import Consumer, Fin, publish
from tests.broker.replicas import Cluster, cluster, post  # noqa: F401 (cluster: a fixture)
from tests.servers import Nsqd, http, wait_for

pytestmark = pytest.mark.timeout(90)


def stats(node: Nsqd) -> dict[str, dict]:
    """Topic name -> its /stats entry, with ``channels`` by name."""
    status, body = http("GET", node.url("/stats?format=json"))
    assert status == 200, body
    return {t["topic_name"]: {**t, "channels": {c["channel_name"]: c for c in t["channels"]}}
            for t in json.loads(body)["topics"]}


def wait_held(c: Cluster, count: int) -> None:
    """Both backups hold ``count`` copies of the owner's messages."""
    for i in (1, 2):
        wait_for(lambda: c.replication(i)["held_copies"].get(c.peers[0]) == count, 10,
                 message=f"backup {i} holds {count} copies")


async def drain(node: Nsqd, topic: str, channel: str, last: bytes, timeout: float = 30) -> list[bytes]:
    """Everything ``channel`` delivers up to and including ``last``, and what came with it."""
    consumer = await Consumer(node.tcp_address, topic, channel, rdy=200).start()
    try:
        await consumer.wait_until(lambda: last in consumer.bodies(), timeout, f"{last!r} delivered")
        await consumer.quiesce()
    finally:
        await consumer.stop()
    return [d.body for d in consumer.deliveries]


async def test_what_the_owner_emptied_or_deleted_is_not_delivered_by_its_adopter(cluster) -> None:
    c = cluster(3)
    owner, adopter, _ = c.nodes
    # orders: billing emptied, audit not
    post(owner, "/topic/create?topic=orders")
    post(owner, "/channel/create?topic=orders&channel=billing")
    post(owner, "/channel/create?topic=orders&channel=audit")
    orders = [b"order-%03d" % i for i in range(100)]
    assert (await publish(owner.tcp_address, "orders", orders, batch=20)).acked == orders
    # bare: no channel, its own queue emptied
    bare = [b"bare-%03d" % i for i in range(50)]
    assert (await publish(owner.tcp_address, "bare", bare, batch=25)).acked == bare
    # gone: the topic deleted, then published to again (created anew, without channels)
    post(owner, "/topic/create?topic=gone")
    post(owner, "/channel/create?topic=gone&channel=x")
    gone = [b"gone-%03d" % i for i in range(30)]
    assert (await publish(owner.tcp_address, "gone", gone, batch=10)).acked == gone
    # last: its only channel deleted
    post(owner, "/topic/create?topic=last")
    post(owner, "/channel/create?topic=last&channel=only")
    last = [b"last-%03d" % i for i in range(40)]
    assert (await publish(owner.tcp_address, "last", last, batch=10)).acked == last
    wait_held(c, 220)

    post(owner, "/channel/empty?topic=orders&channel=billing")
    post(owner, "/topic/empty?topic=bare")
    post(owner, "/topic/delete?topic=gone")
    post(owner, "/channel/delete?topic=last&channel=only")
    markers = {t: b"%s-marker" % t.encode() for t in ("orders", "bare", "gone", "last")}
    for topic, marker in markers.items():
        assert (await publish(owner.tcp_address, topic, [marker])).acked == [marker]
    # orders' 100 stay for audit; nothing else of before the changes
    wait_held(c, 100 + len(markers))

    owner.kill()
    assert await drain(adopter, "orders", "billing", markers["orders"]) == [markers["orders"]]
    assert sorted(await drain(adopter, "orders", "audit", markers["orders"])) == sorted(orders + [markers["orders"]])
    assert await drain(adopter, "bare", "c", markers["bare"]) == [markers["bare"]]
    assert await drain(adopter, "gone", "x", markers["gone"]) == [markers["gone"]]
    assert await drain(adopter, "last", "only", markers["last"]) == [markers["last"]]
    assert c.replication(1)["adopted"] == {c.peers[0]: 100 + len(markers)}


async def test_what_the_owner_paused_is_paused_on_its_adopter(cluster) -> None:
    c = cluster(3)
    owner, adopter, _ = c.nodes
    post(owner, "/topic/create?topic=held")
    post(owner, "/channel/create?topic=held&channel=paused")
    post(owner, "/channel/create?topic=held&channel=flowing")
    post(owner, "/channel/create?topic=held&channel=resumed")
    post(owner, "/channel/pause?topic=held&channel=paused")
    post(owner, "/channel/pause?topic=held&channel=resumed")
    post(owner, "/channel/unpause?topic=held&channel=resumed")
    post(owner, "/topic/create?topic=stopped")
    post(owner, "/channel/create?topic=stopped&channel=c")
    post(owner, "/topic/pause?topic=stopped")
    held = [b"held-%02d" % i for i in range(20)]
    stopped = [b"stopped-%02d" % i for i in range(20)]
    assert (await publish(owner.tcp_address, "held", held, batch=10)).acked == held
    assert (await publish(owner.tcp_address, "stopped", stopped, batch=10)).acked == stopped
    wait_held(c, 40)

    owner.kill()
    # the flowing channel gets everything: the adoption is done
    assert sorted(await drain(adopter, "held", "flowing", held[-1])) == held
    assert sorted(await drain(adopter, "held", "resumed", held[-1])) == held
    after = stats(adopter)
    assert after["held"]["channels"]["paused"]["paused"] is True
    assert after["held"]["channels"]["flowing"]["paused"] is False
    assert after["held"]["channels"]["resumed"]["paused"] is False
    assert after["stopped"]["paused"] is True
    assert after["held"]["channels"]["paused"]["depth"] == 20
    assert after["stopped"]["depth"] == 20  # waits in the paused topic's queue

    consumer = await Consumer(adopter.tcp_address, "held", "paused", rdy=100).start()
    other = await Consumer(adopter.tcp_address, "stopped", "c", rdy=100).start()
    try:
        await consumer.quiesce()  # subscribed, RDY given and taken back: a paused channel sent nothing
        await other.quiesce()
        assert consumer.deliveries == [] and other.deliveries == []
    finally:
        await consumer.stop()
        await other.stop()
    post(adopter, "/channel/unpause?topic=held&channel=paused")
    post(adopter, "/topic/unpause?topic=stopped")
    assert sorted(await drain(adopter, "held", "paused", held[-1])) == held
    assert sorted(await drain(adopter, "stopped", "c", stopped[-1])) == stopped


async def test_a_message_requeued_with_a_delay_waits_for_its_due_time_on_the_adopter(cluster) -> None:
    c = cluster(3)
    owner, adopter, _ = c.nodes
    post(owner, "/topic/create?topic=later")
    post(owner, "/channel/create?topic=later&channel=c")
    bodies = [b"later-%02d" % i for i in range(10)]
    assert (await publish(owner.tcp_address, "later", bodies)).acked == bodies
    delay_ms = 6000
    decisions = iter([("req", delay_ms)] * 5 + [Fin] * 5)
    consumer = await Consumer(owner.tcp_address, "later", "c", rdy=10, decide=lambda d: next(decisions)).start()
    await consumer.wait_until(lambda: len(consumer.deliveries) == 10, 10, "10 deliveries")
    await consumer.quiesce()
    requeued_by = time.time()  # each REQ was sent before this
    requeued = {d.body for d in consumer.deliveries[:5]}
    await consumer.stop()
    wait_held(c, 5)  # the FINs, sent after the REQs, arrived

    owner.kill()
    after = await Consumer(adopter.tcp_address, "later", "c", rdy=10).start()
    try:
        await after.wait_until(lambda: requeued <= after.bodies(), 30, "the requeued messages")
        await after.quiesce()
    finally:
        await after.stop()
    assert sorted(d.body for d in after.deliveries) == sorted(requeued)
    # due no sooner than the REQ's delay after it was sent (the first REQ was sent earliest)
    first_req = consumer.deliveries[0].at
    assert min(d.at for d in after.deliveries) >= first_req + delay_ms / 1000 - 0.2, (
        min(d.at for d in after.deliveries) - first_req)
    assert max(d.at for d in after.deliveries) <= requeued_by + delay_ms / 1000 + 10


async def test_a_pause_taken_over_survives_the_adopters_loss_too(cluster) -> None:
    """The adopter pauses through nsqd, so its own backups learn the pause with the
    messages it re-replicates: a second failover keeps the channel paused."""
    c = cluster(3)
    owner, adopter, last = c.nodes
    post(owner, "/topic/create?topic=twice")
    post(owner, "/channel/create?topic=twice&channel=paused")
    post(owner, "/channel/pause?topic=twice&channel=paused")
    bodies = [b"twice-%02d" % i for i in range(10)]
    assert (await publish(owner.tcp_address, "twice", bodies)).acked == bodies
    wait_held(c, 10)

    owner.kill()
    # re-replicated: the third nsqd holds the adopter's copies, its first backup
    wait_for(lambda: c.replication(2)["held_copies"].get(c.peers[1]) == 10, 20,
             message="the adopted messages re-replicated")
    assert stats(adopter)["twice"]["channels"]["paused"]["paused"] is True
    # the first owner back (in its next generation) and caught up as the adopter's second
    # backup: an adoption needs every backup of the lost node heard (a partition's far
    # side could have acknowledged with the one not heard)
    owner.start()
    wait_for(lambda: all(b["state"] == "in_sync" for b in c.replication(1)["backups"]), 20,
             message="the adopter's backups in sync")

    adopter.kill()
    wait_for(lambda: c.replication(2)["adopted"].get(c.peers[1]) == 10, 20, message="the second adoption")
    after = stats(last)["twice"]["channels"]["paused"]
    assert after["paused"] is True and after["depth"] == 10
    post(last, "/channel/unpause?topic=twice&channel=paused")
    assert sorted(await drain(last, "twice", "paused", bodies[-1])) == bodies
