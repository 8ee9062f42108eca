"""A majority/minority partition of five replicated nsqds (3 replicas of each topic),
each in its own network namespace (``netns.py``): nodes 3 and 4 cut off from 0, 1 and 2,
then healed. Node i's backups are i+1 and i+2 (wrapping), so node 4 (backups 0, 1) and
node 2 (backups 3, 4) have no quorum across the cut and must refuse publishes
(E_PUB_FAILED); node 3 (backups 4, 0) keeps one backup on its side and goes on
acknowledging; nodes 0 and 1 keep serving. Producers publish on all five throughout;
after healing, consumers on every node read everything back and the checker proves
every acknowledged message delivered at least once, counting duplicates."""
from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Iterator

import pytest

from tests.broker import netns
from tests.broker.checker import Load, check, produce, read_back
from tests.broker.netns_cluster import NetnsCluster, netns_cluster
from tests.broker.test_replication_partitions import pub_fails
from tests.servers import wait_for

pytestmark = [pytest.mark.timeout(120),
              pytest.mark.skipif(not netns.available(), reason="needs root, ip and iptables")]

MAJORITY, MINORITY = (0, 1, 2), (3, 4)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[NetnsCluster]:
    with netns_cluster(tmp_path, 5, sync_before_ack="true") as c:
        yield c


async def test_a_minority_cut_off_refuses_what_it_cannot_replicate_and_nothing_acknowledged_is_lost(
        cluster: NetnsCluster) -> None:
    c = cluster
    for node in c.nodes:
        node.post("/topic/create?topic=orders")
        node.post("/channel/create?topic=orders&channel=billing")
    before, during, after = Load(), Load(), Load()
    await asyncio.gather(*[produce(n.tcp_address, "orders", f"a{i}", before, batches=30, batch=10, seconds=5)
                           for i, n in enumerate(c.nodes)])
    assert not before.failed, before.errors

    for a in MINORITY:
        for b in MAJORITY:
            c.spaces.cut(a, b)
    # no quorum across the cut: refused, not acknowledged
    for i in (4, 2):
        assert (await pub_fails(c.nodes[i].tcp_address, "orders", b"refused")).startswith(b"E_PUB_FAILED"), i
    loads = {i: Load() for i in range(5)}
    await asyncio.gather(*[produce(n.tcp_address, "orders", f"d{i}", loads[i], batches=40, batch=5, seconds=4)
                           for i, n in enumerate(c.nodes)])
    for i in (0, 1, 3):
        assert len(loads[i].acked) > 0 and not loads[i].failed, (i, loads[i].errors)
    for i in (2, 4):
        assert not loads[i].acked, f"nsqd {i} acknowledged {len(loads[i].acked)} without a quorum"
    # the majority adopts what the unreachable owners held
    wait_for(lambda: c.peers[4] in c.replication(0)["adopted"], 10, message="nsqd 0 adopted nsqd 4")
    for load in loads.values():
        during.acked += load.acked
        during.failed += load.failed

    c.spaces.heal()
    wait_for(c.in_sync, 20, message="every backup in sync after healing")
    await asyncio.gather(*[produce(n.tcp_address, "orders", f"h{i}", after, batches=4, batch=10, seconds=5)
                           for i, n in enumerate(c.nodes)])
    # (a node learning here that its generation was adopted may refuse its first ones)
    acked = before.acked + during.acked + after.acked
    delivered = await read_back([n.tcp_address for n in c.nodes], "orders", "billing", set(acked), timeout=30)
    report = check(acked, delivered, during.failed + after.failed + [b"refused"])
    adopted = {i: c.replication(i)["adopted"] for i in range(5)}
    print(f"\nmajority/minority: {report}; acknowledged during the cut "
          f"{ {i: len(l.acked) for i, l in loads.items()} }; adopted {adopted}")
    assert not report.lost, f"{len(report.lost)} acknowledged messages lost, e.g. {sorted(report.lost)[:3]}"
