"""A backup that answered an adoption's PULL but acknowledged none of the adopted copies
in time: three nsqds with 3 replicas and --sync-before-ack. The owner is kill -9'd; its
first backup (the adopter) pulls the second backup's copies, then replicates what it
adopted to its own backups: the lost owner and that second backup, whose fsyncs are
stalled (``faults.WorkerFsyncStall``), so the adoption has no quorum within
--replication-timeout and sends the second backup no DROP then. Once the stall is over,
the adopted messages have their quorum: the second backup, still holding the lost
owner's copies and asking the adopter to adopt them, must be told to DROP them, or it
adopts them a second time when the adopter is lost in turn."""
from __future__ import annotations

import pytest

from tests.broker import faults
from tests.broker.load import Consumer, publish
from tests.broker.replicas import cluster, post  # noqa: F401 (cluster: a fixture)
from tests.servers import wait_for

pytestmark = [pytest.mark.timeout(120),
              pytest.mark.skipif(not faults.strace_available(), reason="needs strace (make test installs it)")]

OWNER, ADOPTER, HOLDER = 0, 1, 2
MESSAGES = 300
STALL = 5.0  # seconds: longer than the cluster's --replication-timeout (2 s), which the adoption waits


async def test_a_backup_cut_off_before_the_adopted_messages_quorum_is_told_to_drop_once_it_holds(cluster) -> None:
    c = cluster(3, sync_before_ack="true")
    owner, adopter, holder = c.nodes
    owner_peer, adopter_peer = c.peers[OWNER], c.peers[ADOPTER]
    post(owner, "/topic/create?topic=orders")
    post(owner, "/channel/create?topic=orders&channel=billing")
    bodies = [b"m-%04d" % i for i in range(MESSAGES)]
    acked = (await publish(owner.tcp_address, "orders", bodies, batch=30)).acked
    assert acked == bodies
    for i in (ADOPTER, HOLDER):
        wait_for(lambda i=i: c.replication(i)["held_copies"].get(owner_peer) == MESSAGES, 10,
                 message=f"backup {i} holds every copy")

    assert holder.proc is not None
    with faults.WorkerFsyncStall(holder.proc.pid, int(STALL * 1e6)):
        owner.kill()
        wait_for(lambda: c.replication(ADOPTER)["adopted"].get(owner_peer) == MESSAGES, 15,
                 message="the first backup adopted the owner's messages")
        # the cut this test is about: the adoption gave up waiting for its quorum
        wait_for(lambda: "have no quorum of copies here" in adopter.log(), 10,
                 message="the adoption's copies waited for in vain")
        assert c.replication(HOLDER)["held_copies"].get(owner_peer) == MESSAGES

    wait_for(lambda: not c.replication(HOLDER)["held_copies"].get(owner_peer), 15,
             message="the second backup dropped the adopted owner's copies")
    assert c.replication(HOLDER)["held_copies"].get(adopter_peer) == MESSAGES, "the adopter's own copies"

    # the adopter lost too, the owner back with its data: the second backup adopts what the
    # adopter held, and not the owner's old copies a second time
    adopter.kill()
    owner.start()
    wait_for(lambda: c.replication(HOLDER)["adopted"].get(adopter_peer) == MESSAGES, 30,
             message="the second backup adopted the adopter's messages")
    assert c.replication(HOLDER)["adopted"] == {adopter_peer: MESSAGES}
    consumer = await Consumer(holder.tcp_address, "orders", "billing", rdy=100).start()
    await consumer.wait_until(lambda: set(acked) <= consumer.bodies(), 30, "every acknowledged message")
    await consumer.quiesce()
    await consumer.stop()
    delivered = [d.body for d in consumer.deliveries]
    assert sorted(delivered) == sorted(acked), "duplicates, or messages never published"
