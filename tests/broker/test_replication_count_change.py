"""A held topic's number of copies changed, with real nsqd processes (127.0.33.1-3), as
the operator changes it (``POST /topic/create?replicas=N`` on every nsqd). Raised, the
backup added is sent what the topic holds (its finished messages left out) before it
counts in a quorum; raised from 1, what the topic's and channels' queues hold is read
back to be copied; lowered, the backup removed forgets its copies once the backup kept
holds everything; lowered to 1, every copy is forgotten at once. What survives is what a consumer of the adopter receives after the owner's kill -9
and the deletion of its data directory (of the owner, for a count of 1)."""
from __future__ import annotations

import shutil
import signal
import time

import pytest

from tests.broker.load import Consumer, Fin, Hold, dpub, publish
from tests.broker.replicas import Cluster, cluster, post  # noqa: F401 (cluster: a fixture)
from tests.servers import Nsqd, wait_for

pytestmark = pytest.mark.timeout(60)


def held(c: Cluster, i: int, topic: str = "orders") -> int:
    return c.replication(i)["held_topics"].get(c.peers[0], {}).get(topic, 0)


def set_count(c: Cluster, count: int) -> None:
    for node in c.nodes:
        post(node, f"/topic/create?topic=orders&replicas={count}")


async def adopted_and_delivered(c: Cluster, want: set[bytes]) -> None:
    owner, adopter, _ = c.nodes
    owner.kill()
    shutil.rmtree(owner.workdir / "data")
    await delivered_once(adopter.tcp_address, want)


async def delivered_once(address: str, want: set[bytes], channel: str = "billing") -> dict[bytes, float]:
    """Each of ``want`` delivered once to ``channel`` and nothing else; when each came."""
    consumer = await Consumer(address, "orders", channel, rdy=200).start()
    await consumer.wait_until(lambda: want <= consumer.bodies(), 30, f"{len(want)} messages from {address}")
    await consumer.quiesce()
    await consumer.stop()
    delivered = [d.body for d in consumer.deliveries]
    assert set(delivered) == want, "a finished message came back, or one never published"
    assert len(delivered) == len(want), f"{len(delivered) - len(want)} duplicates"
    return {d.body: d.at for d in consumer.deliveries}


async def publish_and_finish_a_third(owner: Nsqd, *, fin_held: bool) -> tuple[list[bytes], set[bytes]]:
    """300 published; a consumer with RDY 1 finishes the first 100 and holds the next
    (in flight until the message timeout, unless ``fin_held`` finishes it too)."""
    post(owner, "/channel/create?topic=orders&channel=billing")
    first = [b"a-%04d" % i for i in range(300)]
    assert (await publish(owner.tcp_address, "orders", first, batch=50)).acked == first
    decisions = iter([Fin] * 100)
    consumer = await Consumer(owner.tcp_address, "orders", "billing", rdy=1,
                              decide=lambda d: next(decisions, Hold)).start()
    await consumer.wait_until(lambda: len(consumer.finished) == 100, 30, "100 finished")
    await consumer.quiesce()
    if fin_held:
        consumer.fin_held()
        await consumer.quiesce()
    await consumer.stop()
    return first, set(consumer.finished)


async def test_a_count_raised_while_the_topic_holds_messages_copies_them_to_the_backup_added(cluster) -> None:
    c = cluster(3)
    owner = c.nodes[0]
    set_count(c, 2)
    first, finished = await publish_and_finish_a_third(owner, fin_held=False)  # the one held: live, in flight
    wait_for(lambda: held(c, 1) == 200, 10, message="the one backup holds what is not finished")
    assert held(c, 2) == 0

    set_count(c, 3)
    wait_for(lambda: held(c, 2) == 200, 20, message="the backup added holds the topic's live messages")
    wait_for(lambda: all(b["state"] == "in_sync" for b in c.replication(0)["backups"]), 20,
             message="the backup added caught up")
    later = [b"b-%04d" % i for i in range(100)]
    assert (await publish(owner.tcp_address, "orders", later, batch=20)).acked == later
    for i in (1, 2):
        wait_for(lambda i=i: held(c, i) == 300, 10, message=f"backup {i} holds every live message")

    await adopted_and_delivered(c, (set(first) - finished) | set(later))


async def test_a_count_lowered_while_the_topic_holds_messages_has_the_backup_removed_forget_it(cluster) -> None:
    c = cluster(3)
    owner = c.nodes[0]
    post(owner, "/topic/create?topic=orders")
    post(owner, "/channel/create?topic=orders&channel=billing")
    first = [b"a-%04d" % i for i in range(300)]
    assert (await publish(owner.tcp_address, "orders", first, batch=50)).acked == first
    for i in (1, 2):
        wait_for(lambda i=i: held(c, i) == 300, 10, message=f"backup {i} holds every copy")

    set_count(c, 2)
    wait_for(lambda: held(c, 2) == 0, 10, message="the backup removed forgot its copies")
    assert held(c, 1) == 300
    later = [b"b-%04d" % i for i in range(100)]
    assert (await publish(owner.tcp_address, "orders", later, batch=20)).acked == later
    wait_for(lambda: held(c, 1) == 400, 10, message="the backup kept holds every copy")
    assert held(c, 2) == 0

    await adopted_and_delivered(c, set(first) | set(later))


@pytest.mark.parametrize("flags", [{"mem_queue_size": 50}, {"sync_before_ack": "true"}], ids=["memory", "durable"])
async def test_a_count_raised_from_one_copies_what_each_channel_holds_wherever_it_is(cluster, flags) -> None:
    """1 to 3 with 300 messages in two channels, their memory queues holding 50 and the
    rest on disk (durable: all on disk, read ones unacknowledged there). billing finished
    100, holds one in flight and one deferred (a REQ of 8 s); audit consumed nothing. The
    backups get every message some channel owes, and after the adoption each channel
    gets exactly what it owed: billing's in-flight and deferred ones (the latter not
    before it is due), audit's from disk."""
    c = cluster(3, **flags)
    owner = c.nodes[0]
    set_count(c, 1)
    for channel in ("billing", "audit"):
        post(owner, f"/channel/create?topic=orders&channel={channel}")
    first = [b"a-%04d" % i for i in range(300)]
    assert (await publish(owner.tcp_address, "orders", first, batch=50)).acked == first
    decisions = iter([Fin] * 100 + [("req", 8000)])
    consumer = await Consumer(owner.tcp_address, "orders", "billing", rdy=1,
                              decide=lambda d: next(decisions, Hold)).start()
    await consumer.wait_until(lambda: len(consumer.held) == 1, 30, "100 finished, one deferred, one held")
    await consumer.quiesce()
    deferred_at = time.time()
    finished = set(consumer.finished)
    assert held(c, 1) == held(c, 2) == 0

    set_count(c, 3)
    for i in (1, 2):
        wait_for(lambda i=i: held(c, i) == 300, 20, message=f"backup {i} holds what audit owes")
    await consumer.stop()  # its message in flight goes back to billing's queue, uncopied
    later = [b"b-%04d" % i for i in range(50)]
    assert (await publish(owner.tcp_address, "orders", later, batch=10)).acked == later
    wait_for(lambda: held(c, 1) == 350, 10, message="the next publishes are copied")

    owner, adopter, _ = c.nodes
    owner.kill()
    shutil.rmtree(owner.workdir / "data")
    billing = await delivered_once(adopter.tcp_address, (set(first) - finished) | set(later))
    requeued = consumer.deliveries[100]
    assert billing[requeued.body] >= deferred_at + 7.9, "the deferred message came before it was due"
    await delivered_once(adopter.tcp_address, set(first) | set(later), channel="audit")


async def test_a_count_raised_from_one_copies_the_topics_own_queue_with_its_deferred_messages(cluster) -> None:
    """1 to 2 for a topic with no channel yet: 300 messages wait in its queue (50 in
    memory, the rest on disk) between two DPUBs of 8 s, one in memory and one on disk.
    The backup gets all 302; after the adoption a new channel gets them, the DPUBs not
    before they are due."""
    c = cluster(2, size=2, mem_queue_size=50)
    owner, adopter = c.nodes
    set_count(c, 1)
    dpub_at = time.time()
    assert await dpub(owner.tcp_address, "orders", 8000, [b"in-memory"]) == [b"in-memory"]
    first = [b"a-%04d" % i for i in range(300)]
    assert (await publish(owner.tcp_address, "orders", first, batch=50)).acked == first
    assert await dpub(owner.tcp_address, "orders", 8000, [b"on-disk"]) == [b"on-disk"]

    set_count(c, 2)
    wait_for(lambda: held(c, 1) == 302, 20, message="the backup holds the topic's queue")
    owner.kill()
    shutil.rmtree(owner.workdir / "data")
    arrivals = await delivered_once(adopter.tcp_address, set(first) | {b"in-memory", b"on-disk"})
    for body in (b"in-memory", b"on-disk"):
        assert arrivals[body] >= dpub_at + 7.9, f"the deferred message {body!r} came before it was due"


async def test_a_count_lowered_to_one_while_the_topic_holds_messages_has_every_copy_forgotten(cluster) -> None:
    """3 to 1 with 300 messages held and about 100 of them finished: both backups forget their
    copies and the owner its shard; the owner's queues still deliver every live message,
    and what is published later is copied to no one."""
    c = cluster(3)
    owner = c.nodes[0]
    post(owner, "/topic/create?topic=orders")
    first, finished = await publish_and_finish_a_third(owner, fin_held=True)  # the owner delivers it here
    live = len(first) - len(finished)
    for i in (1, 2):
        wait_for(lambda i=i: held(c, i) == live, 10, message=f"backup {i} holds what is not finished")

    set_count(c, 1)
    for i in (1, 2):
        wait_for(lambda i=i: held(c, i) == 0, 10, message=f"backup {i} forgot its copies")
    assert c.replication(0)["live_own"] == 0, "the owner kept its shard of a topic of one copy"
    later = [b"b-%04d" % i for i in range(100)]
    assert (await publish(owner.tcp_address, "orders", later, batch=20)).acked == later
    assert c.replication(0)["live_own"] == 0 and held(c, 1) == 0 and held(c, 2) == 0

    await delivered_once(owner.tcp_address, (set(first) - finished) | set(later))


async def test_a_count_lowered_then_raised_before_the_kept_backup_caught_up_forgets_nothing(cluster) -> None:
    """3 to 2 while the first backup is stopped (SIGSTOP: it has not acknowledged what the
    owner sent), so the second backup is not told to forget yet; then back to 3 (the
    second resynced) before the first backup is let go on. Once the first backup holds
    everything, the second must keep its copies: the count uses it again."""
    c = cluster(3)
    owner, first, _ = c.nodes
    post(owner, "/topic/create?topic=orders")
    post(owner, "/channel/create?topic=orders&channel=billing")
    first.signal(signal.SIGSTOP)
    try:
        sent = [b"a-%04d" % i for i in range(200)]
        assert (await publish(owner.tcp_address, "orders", sent, batch=50)).acked == sent  # the second's ACKs
        wait_for(lambda: held(c, 2) == 200, 10, message="the second backup holds every copy")
        connects = c.replication(0)["backups"][1]["connects"]
        post(owner, "/topic/create?topic=orders&replicas=2")
        post(owner, "/topic/create?topic=orders&replicas=3")  # the second is resynced: a snapshot
        wait_for(lambda: (lambda b: b["connects"] > connects and b["state"] == "in_sync")(
            c.replication(0)["backups"][1]), 10, message="the second backup resynced")
        assert held(c, 2) == 200
    finally:
        first.signal(signal.SIGCONT)
    wait_for(lambda: held(c, 1) == 200 and c.replication(0)["backups"][0]["lag_frames"] == 0, 20,
             message="the first backup acknowledged everything")
    deadline = time.monotonic() + 8 * 0.25  # eight of the owner's ticks, each of which may send a forget
    while time.monotonic() < deadline:
        assert held(c, 2) == 200, "the second backup was told to forget a topic whose count uses it"
