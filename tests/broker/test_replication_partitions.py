"""Replicated topics under network partitions: three nsqds, each in its own network
namespace, links between them cut with iptables while the test (on the host) still
reaches every one. A checker compares what was acknowledged with what consumers got:
every acknowledged message delivered at least once after healing, duplicates counted."""
from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Iterator

import pytest

from tests.broker import netns
from tests.broker.load import Consumer, V2Connection, publish
from tests.broker.netns_cluster import NetnsCluster, netns_cluster
from tests.servers import wait_for

pytestmark = [pytest.mark.timeout(120),
              pytest.mark.skipif(not netns.available(), reason="needs root, ip and iptables")]

@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[NetnsCluster]:
    with netns_cluster(tmp_path, 3) as c:
        yield c


async def pub_fails(address: str, topic: str, body: bytes) -> bytes:
    conn = await V2Connection.open(address)
    try:
        conn.send(b"PUB %s\n" % topic.encode() + len(body).to_bytes(4, "big") + body)
        frame = await conn.frame(timeout=10)
        return frame.data if frame.is_error else b""
    finally:
        await conn.close()


async def test_an_owner_cut_off_from_its_backups_loses_no_acknowledged_message(cluster: NetnsCluster) -> None:
    owner, adopter, _ = cluster.nodes
    owner.post("/topic/create?topic=orders")
    owner.post("/channel/create?topic=orders&channel=billing")
    acked = (await publish(owner.tcp_address, "orders", [b"p-%05d" % i for i in range(1000)], batch=50)).acked
    assert len(acked) == 1000

    cluster.spaces.cut(0, 1)
    cluster.spaces.cut(0, 2)
    # no quorum: the owner refuses, so producers take their messages elsewhere
    assert (await pub_fails(owner.tcp_address, "orders", b"refused")).startswith(b"E_PUB_FAILED")
    # its first backup adopts what the owner held
    wait_for(lambda: cluster.replication(1)["adopted"].get(cluster.peers[0]) == 1000, 15,
             message="the first backup adopted the owner's messages")
    assert cluster.replication(2)["adopted"] == {}

    # consumers of both sides (the owner still reaches its own) take everything
    consumers = [await Consumer(node.tcp_address, "orders", "billing", rdy=200).start() for node in (owner, adopter)]
    for consumer in consumers:
        await consumer.wait_until(lambda c=consumer: set(acked) <= c.bodies(), 30, "every acknowledged message")
    cluster.spaces.heal()
    # healed, the owner learns its generation was adopted and goes on in the next one
    wait_for(lambda: (lambda r: r["generation"] == 2 and all(b["state"] == "in_sync" for b in r["backups"]))(
        cluster.replication(0)), 15, message="links healed, in the owner's next generation")
    assert (await publish(owner.tcp_address, "orders", [b"after"])).acked == [b"after"]
    delivered: Counter[bytes] = Counter()
    for consumer in consumers:
        await consumer.quiesce()
        await consumer.stop()
        delivered.update(d.body for d in consumer.deliveries)
    assert set(acked) <= set(delivered)
    duplicates = sum(delivered.values()) - len(delivered)
    print(f"\nowner cut off: {len(acked)} acknowledged, {duplicates} delivered twice (owner and adopter)")
    assert duplicates <= len(acked)  # bounded by what the owner held at the partition


async def test_a_backup_cut_off_lags_and_catches_up_on_healing(cluster: NetnsCluster) -> None:
    owner = cluster.nodes[0]
    cluster.spaces.cut(0, 2)
    bodies = [b"q-%05d" % i for i in range(500)]
    assert (await publish(owner.tcp_address, "events", bodies, batch=25)).acked == bodies  # quorum 2 of 3
    behind = next(b for b in cluster.replication(0)["backups"] if b["peer"] == cluster.peers[2])
    assert behind["lag_frames"] > 0 and cluster.replication(2)["held_copies"].get(cluster.peers[0], 0) == 0
    cluster.spaces.heal()
    wait_for(lambda: cluster.replication(2)["held_copies"].get(cluster.peers[0]) == 500, 20,
             message="the cut-off backup received what it missed")
    wait_for(lambda: all(b["lag_frames"] <= 1 and b["missed_frames"] == 0
                         for b in cluster.replication(0)["backups"]), 10, message="no backup behind")
