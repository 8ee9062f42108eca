"""Third-party producers, unchanged, against a replicated topic: pynsq's Writer and gnsq's
Producer publish to one nsqd of three (3 replicas); that nsqd is killed with kill -9 and
its data directory deleted; every message either client saw acknowledged is delivered
by the survivors."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.broker.load import Consumer
from tests.broker.replicas import Cluster
from tests.interop.checks import published_ids
from tests.interop.client_process import Clients
from tests.interop.clients.bodies import make_body, message_id

pytestmark = [pytest.mark.interop, pytest.mark.timeout(120)]

COUNT = 2000


@pytest.mark.parametrize("library", ["pynsq", "gnsq"])
async def test_third_party_producer_acknowledged_messages_survive_the_loss_of_their_nsqd(
        library: str, tmp_path: Path, clients: Clients) -> None:
    cluster = Cluster(tmp_path, 3).start()
    try:
        cluster.wait_connected()
        owner, adopter, _ = cluster.nodes
        prefix = f"{library}-r3"
        producer = clients.start(f"{library}_producer.py", "--nsqd", owner.tcp_address, "--topic", "orders",
                                 "--prefix", prefix, "--count", COUNT, "--mpub-batch", 20)
        assert producer.wait_exit(60) == 0, producer.describe()
        acked = published_ids(producer.records())
        assert sorted(acked) == [message_id(prefix, i) for i in range(COUNT)]

        owner.kill()
        shutil.rmtree(owner.workdir / "data")
        want = {make_body(ident) for ident in acked}
        consumer = await Consumer(adopter.tcp_address, "orders", "c", rdy=500).start()
        await consumer.wait_until(lambda: want <= consumer.bodies(), 30, f"{COUNT} messages from the adopter")
        await consumer.quiesce()
        await consumer.stop()
        assert len(consumer.deliveries) == COUNT
    finally:
        cluster.stop()
