"""A survivor whose answer to an adoption's PULL is slow (its network is) is waited for as
long as its copies keep coming: an adopter that gave up after a fixed time would adopt
without them and then tell that survivor to drop them, losing every acknowledged message
it alone held.

Three replicated nsqds in network namespaces (``netns.py``). The owner's first backup is
stopped (SIGSTOP) while the owner publishes, so its second backup alone acknowledges
those messages; the owner is killed with kill -9 and the second backup's sends are
limited to 4 Mbit/s, so its answer takes several times the adopter's silence timeout
(``adoption.PULL_TIMEOUT``). The first backup, let go on, adopts: every acknowledged
message is delivered."""
from __future__ import annotations

import shutil
import signal
import time
from pathlib import Path
from typing import Iterator

import pytest

from tests.broker import netns
from tests.broker.load import Consumer, publish
from tests.broker.netns_cluster import NetnsCluster, netns_cluster
from tests.servers import wait_for

pytestmark = [pytest.mark.timeout(120),
              pytest.mark.skipif(not netns.available() or not shutil.which("tc"), reason="needs root, ip, iptables and tc")]

OWNER, FIRST, SECOND = 0, 1, 2
MESSAGES = 20_000
BODY = 200  # about 4.5 MB of copies on the wire
PULL_TIMEOUT = 5.0  # nsqd's: how long an adopter waits for a survivor that sends nothing


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[NetnsCluster]:
    with netns_cluster(tmp_path, 3) as c:
        yield c


async def test_an_adopter_waits_for_a_slow_survivors_copies_while_they_keep_coming(cluster: NetnsCluster) -> None:
    c = cluster
    owner, first, second = c.nodes
    owner_peer = c.peers[OWNER]
    owner.post("/topic/create?topic=orders")
    owner.post("/channel/create?topic=orders&channel=billing")

    first.signal(signal.SIGSTOP)
    try:
        bodies = [b"%06d" % i + b"x" * (BODY - 6) for i in range(MESSAGES)]
        acked = (await publish(owner.tcp_address, "orders", bodies, batch=200)).acked
        assert acked == bodies
        wait_for(lambda: c.replication(SECOND)["held_copies"].get(owner_peer) == MESSAGES, 10,
                 message="the second backup holds every copy")
        owner.kill()
        c.spaces.throttle(SECOND, "4mbit")
    finally:
        first.signal(signal.SIGCONT)

    started = time.monotonic()
    wait_for(lambda: c.replication(FIRST)["adopted"].get(owner_peer) is not None, 60, interval=0.1,
             message="the first backup adopted")
    took = time.monotonic() - started
    print(f"\nadopted in {took:.1f}s")
    assert c.replication(FIRST)["adopted"] == {owner_peer: MESSAGES}
    assert took > PULL_TIMEOUT, f"the answer took {took:.1f}s: the slow path was not exercised"

    consumer = await Consumer(first.tcp_address, "orders", "billing", rdy=500).start()
    await consumer.wait_until(lambda: set(acked) <= consumer.bodies(), 30, "every acknowledged message")
    await consumer.quiesce()
    await consumer.stop()
    delivered = [d.body for d in consumer.deliveries]
    assert len(delivered) == len(set(delivered)) == MESSAGES, "duplicates, or messages never published"
