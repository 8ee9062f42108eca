"""--mem-queue-size=0: no message is queued in memory; every one goes through the disk
queue (NSQ's files under --data-path) and is still delivered."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.broker.load import Consumer, publish
from tests.servers import Nsqd, http, wait_for

pytestmark = pytest.mark.timeout(90)

SINGLE, BATCHED = 100, 400  # PUBs one at a time, then MPUBs of 50


def create(nsqd: Nsqd, path: str) -> None:
    status, answer = http("POST", nsqd.url(path))
    assert status == 200, (path, status, answer)


def segment_bytes(nsqd: Nsqd, queue: str) -> int:
    return sum(p.stat().st_size for p in Path(nsqd.workdir, "data").glob(f"{queue}.diskqueue.*.dat")
               if not p.name.endswith(".meta.dat"))


async def publish_all(nsqd: Nsqd, topic: str) -> list[bytes]:
    bodies = [b"%s-%04d" % (topic.encode(), i) for i in range(SINGLE + BATCHED)]
    for chunk, batch in ((bodies[:SINGLE], 1), (bodies[SINGLE:], 50)):
        assert (await publish(nsqd.tcp_address, topic, chunk, batch=batch)).acked == chunk
    return bodies


async def consume_all(nsqd: Nsqd, topic: str, channel: str, bodies: list[bytes]) -> None:
    consumer = await Consumer(nsqd.tcp_address, topic, channel, rdy=100).start()
    await consumer.wait_until(lambda: len(consumer.deliveries) >= len(bodies), 30, "every message delivered")
    await consumer.quiesce()
    await consumer.stop()
    assert sorted(d.body for d in consumer.deliveries) == sorted(bodies)


async def test_every_message_goes_through_the_disk_queue(servers) -> None:
    nsqd = servers.nsqd(mem_queue_size=0)
    create(nsqd, "/topic/create?topic=orders")
    create(nsqd, "/channel/create?topic=orders&channel=store")
    create(nsqd, "/topic/create?topic=lonely")  # no channel: messages wait in the topic itself

    orders = await publish_all(nsqd, "orders")
    lonely = await publish_all(nsqd, "lonely")
    total = len(orders)

    def all_on_disk() -> bool:
        channel, topic = nsqd.channel("orders", "store"), nsqd.topic("lonely")
        assert channel is not None and topic is not None
        return (channel["depth"] == channel["backend_depth"] == total
                and topic["depth"] == topic["backend_depth"] == total)

    wait_for(all_on_disk, 10, message=f"{total} messages in each disk queue, none in memory")
    orders_topic = nsqd.topic("orders")
    assert orders_topic is not None and orders_topic["depth"] == 0  # handed on to its channel
    for queue, bodies in (("orders:store", orders), ("lonely", lonely)):
        # each entry: 4-byte length, then timestamp, attempts, ID (26 bytes) and body
        assert segment_bytes(nsqd, queue) == sum(4 + 26 + len(b) for b in bodies), queue

    await consume_all(nsqd, "orders", "store", orders)
    create(nsqd, "/channel/create?topic=lonely&channel=late")
    await consume_all(nsqd, "lonely", "late", lonely)

    def drained() -> bool:
        return all(c is not None and c["depth"] == c["backend_depth"] == c["in_flight_count"] == 0
                   for c in (nsqd.channel("orders", "store"), nsqd.channel("lonely", "late")))

    wait_for(drained, 10, message="both channels empty")
