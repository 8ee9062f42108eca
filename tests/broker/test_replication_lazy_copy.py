"""With 3 replicas a publish needs one backup's ACK: the owner writes to the first backup in
sync at once and to the other lazily (within a few milliseconds, with what follows). The
lazy copy must still arrive when nothing follows it, and when the first backup stops
answering without losing its connection (SIGSTOP: no ACK, no close), the lazy one's ACKs
must answer the publishes within milliseconds: not at the next PING (the link's pings,
every quarter of ``--replication-failover-timeout``, write what it holds too), and not at
``--replication-timeout``; and once the first lags the second by more than
``LAG_MARGIN`` frames, the second is written at once and answers without the lazy delay."""
from __future__ import annotations

import signal
import statistics
import time
from typing import Callable

from tests.broker.conftest import Connect
from tests.broker.replicas import Cluster, cluster  # noqa: F401  (the fixture)
from tests.servers import Nsqd, wait_for

TIMEOUT_S = 3.0  # --replication-timeout: a publish not held by a quorum by then fails
FAILOVER_S = 2.0  # --replication-failover-timeout: a PING every 0.5 s
LAG_MARGIN = 64  # nsqd.replication.replicator's: frames behind before the other backup goes first
LAZY_DELAY_S = 0.005  # nsqd.replication.link's


def held_from(node: Nsqd, owner: str) -> int:
    return int(node.get_json("/replication")["held_copies"].get(owner, 0))


def backups_in_order(c: Cluster) -> tuple[str, list[Nsqd]]:
    """The owner's replication address, and its backups' nodes in the order it writes to them."""
    stats = c.replication(0)
    by_peer = dict(zip(c.peers, c.nodes))
    return stats["node"], [by_peer[b["peer"]] for b in stats["backups"]]


def test_the_copy_beyond_the_quorum_arrives_and_answers_when_the_first_backup_stops(
        cluster: Callable[..., Cluster], connect: Connect) -> None:
    c = cluster(3, replication_timeout=f"{TIMEOUT_S:g}s", replication_failover_timeout=f"{FAILOVER_S:g}s")
    owner_name, (first, second) = backups_in_order(c)
    conn = connect(c.nodes[0])
    for i in range(100):
        conn.pub("orders", b"a%d" % i)
        conn.expect_ok()
    # nothing is published after these: the lazy copy is written by its own deadline
    wait_for(lambda: (held_from(first, owner_name), held_from(second, owner_name)) == (100, 100), 5,
             message=f"both backups hold the 100 messages ({held_from(first, owner_name)}, "
                     f"{held_from(second, owner_name)})")

    first.signal(signal.SIGSTOP)  # connected, silent: the owner still counts it in sync
    try:
        waited = []
        for i in range(200):  # the first LAG_MARGIN at about LAZY_DELAY_S each, the rest faster
            started = time.monotonic()
            conn.pub("orders", b"b%d" % i)
            conn.expect_ok(timeout=TIMEOUT_S + 5)  # E_PUB_FAILED here if only the first backup could answer
            waited.append(time.monotonic() - started)
        assert statistics.median(waited) < 0.1, \
            f"publishes waited {statistics.median(waited):.3f} s (median) for the second backup's copy"
        later = statistics.median(waited[LAG_MARGIN + 20:])
        assert later < LAZY_DELAY_S / 2, \
            f"with the first backup {LAG_MARGIN}+ frames behind, publishes still waited {later * 1000:.2f} ms " \
            "(median): the second is still written lazily"
        assert held_from(second, owner_name) == 300
    finally:
        first.signal(signal.SIGCONT)
    wait_for(lambda: held_from(first, owner_name) == 300, 10,
             message=f"the first backup catches up once let go on ({held_from(first, owner_name)})")
    assert int(c.nodes[0].topic("orders")["message_count"]) == 300
