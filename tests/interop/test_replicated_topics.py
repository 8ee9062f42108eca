"""Third-party clients, unchanged, against a replicated topic: pynsq's Writer, gnsq's
Producer and go-nsq's Producer publish to one nsqd of three (3 replicas); pynsq's
Reader, gnsq's and go-nsq's Consumer find nsqds through nsqlookupd. That nsqd is killed
with kill -9 and its data directory deleted; every message a client saw acknowledged is
delivered by the survivors."""
from __future__ import annotations

import shutil
from collections import Counter
from pathlib import Path

import pytest

from tests.broker.load import Consumer
from tests.broker.replicas import Cluster, post
from tests.interop.checks import deliveries, published_ids
from tests.interop.client_process import Clients
from tests.interop.clients.bodies import make_body, message_id
from tests.servers import Nsqlookupd, wait_for

pytestmark = [pytest.mark.interop, pytest.mark.timeout(120)]

COUNT = 2000
CONSUMERS = {"p": "pynsq", "g": "gnsq", "go": "go-nsq"}  # channel: the library reading it
IN_FLIGHT = 20
# at a kill, what a channel had in flight, plus what it finished less than a link round
# trip before (its FINs had not reached the backups yet)
DUPLICATES_AT_MOST = 3 * IN_FLIGHT


def producer_of(library: str, gonsq: Path) -> list[str]:
    return [str(gonsq), "produce"] if library == "go-nsq" else [f"{library}_producer.py"]


def consumer_of(library: str, gonsq: Path) -> list[str]:
    return [str(gonsq), "consume"] if library == "go-nsq" else [f"{library}_consumer.py"]


@pytest.mark.parametrize("library", ["pynsq", "gnsq", "go-nsq"])
async def test_third_party_producer_acknowledged_messages_survive_the_loss_of_their_nsqd(
        library: str, tmp_path: Path, clients: Clients, gonsq: Path) -> None:
    cluster = Cluster(tmp_path, 3).start()
    try:
        cluster.wait_connected()
        owner, adopter, _ = cluster.nodes
        prefix = f"{library}-r3"
        producer = clients.start(*producer_of(library, gonsq), "--nsqd", owner.tcp_address, "--topic", "orders",
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


def test_third_party_consumers_find_the_adopter_through_lookupd(tmp_path: Path, clients: Clients,
                                                               gonsq: Path) -> None:
    """pynsq's Reader, gnsq's and go-nsq's Consumer, unchanged, each on a channel, discover nsqds only
    through nsqlookupd. The nsqd they read from is killed with kill -9 mid-stream and its
    data directory deleted: the adopter registers the topic with lookupd, both consumers
    find it, and every acknowledged message reaches both channels, duplicates bounded by
    what was in flight at the kill."""
    lookupd = Nsqlookupd(tmp_path / "lookupd").start()
    cluster = Cluster(tmp_path, 3, lookupd_tcp_address=lookupd.tcp_address)
    try:
        cluster.start().wait_connected()
        owner, adopter, _ = cluster.nodes
        post(owner, "/topic/create?topic=orders")
        for channel in CONSUMERS:  # both channels exist before the first publish and are replicated with it
            post(owner, f"/channel/create?topic=orders&channel={channel}")
        producer = clients.start("pynsq_producer.py", "--nsqd", owner.tcp_address, "--topic", "orders",
                                 "--prefix", "lk", "--count", COUNT, "--mpub-batch", 20)
        assert producer.wait_exit(60) == 0, producer.describe()
        acked = set(published_ids(producer.records()))
        assert len(acked) == COUNT
        wait_for(lambda: lookupd.producer_tcp_ports("orders") == {owner.tcp_port}, 10, message="owner listed")

        consumers = {channel: clients.start(*consumer_of(library, gonsq), "--lookupd", lookupd.http_address,
                                            "--topic", "orders", "--channel", channel,
                                            "--max-in-flight", IN_FLIGHT, "--handle-seconds", 0.002)
                     for channel, library in CONSUMERS.items()}
        for channel, consumer in consumers.items():
            consumer.wait_until(lambda records: len(records) >= COUNT // 5, 30, f"{channel} mid-stream")
            assert len(consumer.records()) < COUNT, f"{channel} read everything before the kill: slow it down"

        owner.kill()
        shutil.rmtree(owner.workdir / "data")

        wait_for(lambda: adopter.tcp_port in lookupd.producer_tcp_ports("orders"), 20, message="adopter listed")
        for channel, consumer in consumers.items():
            consumer.wait_until(lambda records: acked <= deliveries(records).get(channel, Counter()).keys(), 40,
                                f"every acknowledged message on {channel}")
        for channel, consumer in consumers.items():
            delivered = deliveries(consumer.records())[channel]
            assert delivered.keys() == acked, channel
            duplicates = sum(delivered.values()) - len(acked)
            print(f"{channel} ({CONSUMERS[channel]}): {len(acked)} acknowledged, {duplicates} delivered twice")
            assert duplicates <= DUPLICATES_AT_MOST, (channel, duplicates)
    finally:
        cluster.stop()
        lookupd.stop()
