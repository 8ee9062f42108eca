"""The cluster the API tests share: one lookupd, two nsqds holding known topics, a
consumer, and a topic lookupd knows that no nsqd holds."""
from __future__ import annotations

from dataclasses import dataclass

from tests.conftest import Servers
from tests.servers import Nsqd, Nsqlookupd, http, wait_for

from .processes import Consumer


@dataclass
class Cluster:
    lookupd: Nsqlookupd
    nsqd1: Nsqd
    nsqd2: Nsqd
    consumer: Consumer


def post(server: Nsqd | Nsqlookupd, path: str, body: bytes = b"") -> None:
    status, answer = http("POST", server.url(path), body)
    assert status == 200, (path, status, answer)


def registered(lookupd: Nsqlookupd, topic: str, count: int) -> None:
    wait_for(lambda: len(lookupd.producers(topic)) == count, message=f"{topic} registered by {count} nsqds")


def start_cluster(servers: Servers) -> Cluster:
    """``cmp`` on both nsqds with channel ``ch`` (a consumer on nsqd1's), ``solo`` on nsqd1
    with channels ``a`` and ``b``, ``ghost`` in lookupd only; nsqd1 measures e2e latency."""
    lookupd = servers.lookupd()
    nsqd1 = servers.nsqd(lookupd_tcp_address=lookupd.tcp_address, e2e_processing_latency_percentile="0.99,0.5")
    nsqd2 = servers.nsqd(lookupd_tcp_address=lookupd.tcp_address)
    for nsqd in (nsqd1, nsqd2):
        post(nsqd, "/topic/create?topic=cmp")
        post(nsqd, "/channel/create?topic=cmp&channel=ch")
        for i in range(3):
            post(nsqd, "/pub?topic=cmp", b"m%d" % i)
    post(nsqd1, "/topic/create?topic=solo")
    post(nsqd1, "/channel/create?topic=solo&channel=a")
    post(nsqd1, "/channel/create?topic=solo&channel=b")
    post(nsqd1, "/pub?topic=solo", b"s")
    post(lookupd, "/topic/create?topic=ghost")
    post(lookupd, "/channel/create?topic=ghost&channel=gc")
    registered(lookupd, "cmp", 2)
    registered(lookupd, "solo", 1)
    consumer = Consumer(nsqd1, "cmp", "ch")

    def consumed() -> bool:
        channel = nsqd1.channel("cmp", "ch")
        return bool(channel and channel["client_count"] == 1 and channel["depth"] == 0
                    and channel["in_flight_count"] == 0 and channel["message_count"] == 3)
    wait_for(consumed, message="the consumer finished nsqd1's cmp/ch")
    return Cluster(lookupd, nsqd1, nsqd2, consumer)
