"""The pynsq consumer runner other e2e tests build on: pynsq Readers find every nsqd
through lookupd, and each delivery comes back with the nsqd it came from, nsqd's
message ID and the exact body."""
from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from e2e.pynsq_consumers import Delivery, PynsqConsumers
from nsq_local.cluster import LocalCluster
from nsq_local.options import ClusterOptions

pytestmark = pytest.mark.slow

TOPIC, CHANNELS = "runner", ["first", "second"]
PER_NODE = 10


@pytest.mark.timeout(60)
async def test_readers_report_every_delivery_with_its_nsqd_and_message_id(tmp_path: Path) -> None:
    async with LocalCluster(ClusterOptions(workdir=tmp_path, nsqds=2, lookupds=1)) as cluster:
        await cluster.create_topics([TOPIC], CHANNELS)
        seen: list[Delivery] = []
        consumers = PynsqConsumers([(TOPIC, c) for c in CHANNELS], cluster.lookupd_http_addresses,
                                   tmp_path, on_delivery=seen.append)
        await consumers.start()
        try:
            sent: dict[str, set[bytes]] = {}
            for node in cluster.nsqds:
                bodies = [f"{node.name} {i} \x00\xff".encode("latin-1") for i in range(PER_NODE)]
                await cluster.nsqd_admin(node).multi_publish(TOPIC, bodies)
                sent[node.tcp_address] = set(bodies)
            everything = len(CHANNELS) * len(cluster.nsqds) * PER_NODE
            await consumers.wait_until(lambda: len(consumers.deliveries()) >= everything, 20,
                                       "every message on every channel")
        finally:
            assert await consumers.stop() == 0, consumers.describe()

    deliveries = consumers.deliveries()
    assert seen == deliveries
    assert len(deliveries) == everything
    for channel in CHANNELS:
        for address, published in sent.items():
            assert sorted(d.body for d in deliveries if d.channel == channel and d.nsqd == address) == sorted(published)
    assert all(d.topic == TOPIC and d.attempts == 1 and len(d.message_id) == 16 for d in deliveries)
    assert len({(d.nsqd, d.message_id) for d in deliveries}) == everything // len(CHANNELS)
    connected = Counter((e.channel, e.nsqd) for e in consumers.events("connected"))
    assert connected == Counter({(c, n.tcp_address): 1 for c in CHANNELS for n in cluster.nsqds})
