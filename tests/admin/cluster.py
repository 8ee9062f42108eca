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


def unregistered(lookupd: Nsqlookupd, nsqd: Nsqd, topic: str) -> None:
    """Wait until lookupd no longer lists ``topic`` among ``nsqd``'s, tombstoned or not: it
    has then had every registration nsqd sent before its unregistering."""
    def gone() -> bool:
        nodes = lookupd.get_json("/nodes")["producers"]
        return all(topic not in n["topics"] for n in nodes if n["tcp_port"] == nsqd.tcp_port)
    wait_for(gone, message=f"{topic} unregistered by {nsqd.tcp_address}")


def forget_topic(lookupd: Nsqlookupd, topic: str, nsqds: list[Nsqd]) -> None:
    """Delete ``topic`` everywhere: from lookupd once each nsqd's unregistering reached it."""
    for nsqd in nsqds:
        post(nsqd, f"/topic/delete?topic={topic}")
    for nsqd in nsqds:
        unregistered(lookupd, nsqd, topic)
    post(lookupd, f"/topic/delete?topic={topic}")


def started(nsqd: Nsqd, topic: str, channel: str) -> None:
    """Wait until ``topic`` on ``nsqd`` has started: a new topic first asks lookupd for
    the channels to create, and starts passing messages to its channels after. Publishes
    a message and waits for ``channel`` to have it."""
    before = nsqd.channel(topic, channel)
    assert before is not None, f"{topic}/{channel} is on {nsqd.http_address}"
    post(nsqd, f"/pub?topic={topic}", b"start")
    wait_for(lambda: nsqd.channel(topic, channel)["message_count"] > before["message_count"],  # type: ignore[index]
             message=f"{topic} started on {nsqd.http_address}")


LATENCY_QUANTILES = "0.99,0.5"


def start_cluster(servers: Servers) -> Cluster:
    """``cmp`` on both nsqds with channel ``ch`` (a consumer on nsqd1's), ``solo`` on nsqd1
    with channels ``a`` and ``b``, ``ghost`` in lookupd only.

    Both nsqds measure the same e2e latency quantiles. Go nsqadmin grows a topic's channel
    sum from the first node's entry, and with both nsqds on one hostname "first" is
    whichever answered first: were only one measuring, the keys of Go's sum would depend
    on that race (see test_channel_sum_follows_the_first_host_like_go for distinct hosts)."""
    lookupd = servers.lookupd()
    nsqd1, nsqd2 = (servers.nsqd(lookupd_tcp_address=lookupd.tcp_address,
                                 e2e_processing_latency_percentile=LATENCY_QUANTILES) for _ in range(2))
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
