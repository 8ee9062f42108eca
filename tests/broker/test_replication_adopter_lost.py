"""An adopter killed in the middle of an adoption: three replicated nsqds, each in its own
network namespace (``netns.py``). The owner is killed with kill -9; its first backup
begins adopting (it fences the owner's generation, on itself and, by its PULL, on the
other backup) but never hears the other backup's copies, because the other backup's
answers to it are dropped; it is killed too before it announces anything. The second
backup, which that PULL fenced, must finish the adoption on its own, even though the
owner is back by then: every acknowledged message is delivered, and the owner, told its
generation was adopted, empties what it held and goes on in its next generation."""
from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Callable, Iterator

import pytest

from tests.broker import netns
from tests.broker.load import Consumer, publish
from tests.broker.netns_cluster import REPLICATION_PORT, NetnsCluster, netns_cluster
from tests.broker.test_replication_partitions import pub_fails
from tests.servers import Nsqd, wait_for

pytestmark = [pytest.mark.timeout(120),
              pytest.mark.skipif(not netns.available(), reason="needs root, ip and iptables")]

OWNER, FIRST, SECOND = 0, 1, 2


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[NetnsCluster]:
    # 3 s before a silent peer is lost, so that the owner is back before the first backup
    # is called lost
    with netns_cluster(tmp_path, 3, sync_before_ack="true", replication_failover_timeout="3s") as c:
        yield c


def generations(node: Nsqd) -> dict:
    """What a node keeps on disk of generations: fenced and announced, per owner."""
    try:
        return json.loads((node.workdir / "data" / "replication" / "generations.json").read_text())
    except FileNotFoundError:
        return {"own": 1, "fenced": {}, "announced": {}}


def alive(c: NetnsCluster, observer: int, peer: int) -> bool:
    return next(p["alive"] for p in c.replication(observer)["peers"] if p["peer"] == c.peers[peer])


async def async_wait_for(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting: {what}"
        await asyncio.sleep(0.02)


def drop_answers(c: NetnsCluster, sender: int, receiver: int) -> None:
    """``sender`` answers nothing more to the links ``receiver`` opened to it: every segment
    carrying data from its replication port to ``receiver`` is dropped, while its bare TCP
    ACKs pass (so what ``receiver`` sends still arrives whole) and its own links to
    ``receiver``, from ports of their own, carry its pings as before."""
    def rule(*match: str) -> None:
        c.spaces.exec(c.spaces.names[sender], "iptables", "-A", "OUTPUT", "-p", "tcp", "-d",
                      c.spaces.ips[receiver], "--sport", str(REPLICATION_PORT), *match, "-j", "DROP")
    rule("--tcp-flags", "PSH", "PSH")  # a segment ending a write
    rule("-m", "length", "--length", "65:65535")  # longer than a bare ACK with a SACK block


async def test_an_adopter_killed_mid_adoption_is_relieved_by_the_backup_it_fenced(cluster: NetnsCluster) -> None:
    c = cluster
    owner, first, second = c.nodes
    owner_peer = c.peers[OWNER]
    owner.post("/topic/create?topic=orders")
    owner.post("/channel/create?topic=orders&channel=billing")
    bodies = [b"o-%05d" % i for i in range(1200)]
    acked = (await publish(owner.tcp_address, "orders", bodies, batch=40)).acked
    assert acked == bodies
    for i in (FIRST, SECOND):
        wait_for(lambda i=i: c.replication(i)["held_copies"].get(owner_peer) == len(acked), 10,
                 message=f"backup {i} holds every copy")

    drop_answers(c, SECOND, FIRST)
    owner.kill()
    # the first backup fences the owner's generation and asks the second for its copies,
    # which fences it there too; the answer never comes (it waits for it up to 5 s)
    wait_for(lambda: generations(first)["fenced"].get(owner_peer) == 1
             and generations(second)["fenced"].get(owner_peer) == 1, 10,
             interval=0.005, message="the adoption began on both backups")
    first.kill()
    assert owner_peer not in generations(first)["announced"], "the first backup finished before it was killed"
    assert c.replication(SECOND)["adopted"] == {}

    # the owner comes back with its data while the second backup waits to call the first
    # lost; its generation 1 is refused there, and the adoption goes on regardless
    restarted = asyncio.create_task(asyncio.to_thread(owner.start))
    await async_wait_for(lambda: alive(c, SECOND, OWNER) or bool(c.replication(SECOND)["adopted"]), 20,
                         "the second backup hears the owner again")
    assert c.replication(SECOND)["adopted"] == {}, "adopted before the owner was back: the owner's return untested"
    await async_wait_for(lambda: c.replication(SECOND)["adopted"].get(owner_peer) == len(acked), 20,
                         "the second backup adopted the owner's messages")
    await restarted
    consumer = await Consumer(second.tcp_address, "orders", "billing", rdy=300).start()
    await consumer.wait_until(lambda: set(acked) <= consumer.bodies(), 30, "every acknowledged message")
    await consumer.quiesce()
    await consumer.stop()
    delivered = [d.body for d in consumer.deliveries]
    assert len(delivered) == len(set(delivered)) == len(acked), "duplicates, or messages never published"

    # told of the adoption, the owner empties its replicated topic and goes on in generation 2
    wait_for(lambda: c.replication(OWNER)["generation"] == 2, 20, message="the owner in its next generation")
    assert owner.channel("orders", "billing")["depth"] == 0
    assert (await publish(owner.tcp_address, "orders", [b"next"])).acked == [b"next"]  # quorum: owner and second
    wait_for(lambda: c.replication(SECOND)["held_copies"].get(owner_peer) == 1, 10,
             message="the second backup holds the new generation's message")
