"""A drain under gnsq's Consumer, a client that never sends CLS: the draining nsqd keeps
the connection open while the consumer still holds messages from it, sends it nothing
new, closes it once those messages are FINed (long before the drain timeout), and
exits 0; the consumer carries on with the other nsqd it found through lookupd, comes
back to the drained one through lookupd after its restart on the same data directory,
and receives what was still queued there. No message is lost or delivered twice."""
from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest

from tests.broker.test_drain import exit_code
from tests.conftest import Servers
from tests.interop import raw_nsq
from tests.interop.checks import assert_exactly_once, deliveries, wait_subscribed
from tests.interop.client_process import Clients, Record
from tests.interop.clients.bodies import WARMUP_PREFIX, make_body, message_id
from tests.servers import Nsqd, wait_for

pytestmark = pytest.mark.interop

TOPIC, CHANNEL = "gnsq_drain", "work"
HOLD = "hold"
HELD = 8  # published to the draining nsqd, more than gnsq's RDY lets it have in flight
DRAIN_TIMEOUT = 30.0


def publish(nsqd: Nsqd, ids: list[str]) -> None:
    raw_nsq.publish(nsqd.tcp_address, TOPIC, [make_body(i) for i in ids], batch=1)


def delivered_ids(records: list[Record]) -> set[str]:
    return set(deliveries(records).get(CHANNEL, {}))


def events(records: list[Record], event: str, nsqd: Nsqd) -> list[int]:
    """Positions in the consumer's output of EVENT on its connection to NSQD."""
    return [i for i, r in enumerate(records) if r.get("event") == event and r.get("nsqd") == nsqd.tcp_address]


def held(records: list[Record]) -> list[Record]:
    return [r for r in records if r.get("held")]


def test_gnsq_consumer_is_let_go_once_its_messages_settle_and_loses_nothing(
        servers: Servers, clients: Clients, tmp_path: Path) -> None:
    lookupd = servers.lookupd()
    leaving = servers.nsqd(drain_timeout=f"{DRAIN_TIMEOUT:.0f}s", lookupd_tcp_address=lookupd.tcp_address)
    staying = servers.nsqd(lookupd_tcp_address=lookupd.tcp_address)
    for nsqd in (leaving, staying):
        assert nsqd.post(f"/topic/create?topic={TOPIC}").status == 200
        assert nsqd.post(f"/channel/create?topic={TOPIC}&channel={CHANNEL}").status == 200
    wait_for(lambda: lookupd.producer_tcp_ports(TOPIC) == {leaving.tcp_port, staying.tcp_port}, 10,
             message="lookupd lists both nsqds")
    release = tmp_path / "release"
    consumer = clients.start("gnsq_drain_consumer.py", "--lookupd-http", lookupd.http_address, "--topic", TOPIC,
                             "--channel", CHANNEL, "--max-in-flight", 6, "--hold", HOLD, "--release", release)
    wait_subscribed(leaving, TOPIC, [CHANNEL])
    wait_subscribed(staying, TOPIC, [CHANNEL])
    # gnsq keeps a connection at RDY 1 until its first FIN
    warmups = [message_id(WARMUP_PREFIX, 0), message_id(WARMUP_PREFIX, 1)]
    publish(leaving, warmups[:1])
    publish(staying, warmups[1:])
    consumer.wait_until(lambda r: delivered_ids(r) >= set(warmups), 15, "gnsq finished the warm-up messages")

    holds = [message_id(HOLD, i) for i in range(HELD)]
    publish(leaving, holds)
    consumer.wait_until(lambda r: len(held(r)) >= 2, 15, "gnsq holds messages from the nsqd to drain")

    leaving.signal(signal.SIGTERM)
    wait_for(lambda: leaving.get("/ready").status == 503, 5, message="the drain started")
    wait_for(lambda: lookupd.producer_tcp_ports(TOPIC) == {staying.tcp_port}, 10,
             message="lookupd forgets the draining nsqd")
    in_flight = leaving.get_json("/drain")["in_flight"]
    assert 2 <= in_flight < HELD
    consumer.wait_until(lambda r: len(held(r)) == in_flight, 5, "gnsq holds what nsqd counts in flight")

    # the consumer keeps working through the other nsqd, still connected to the draining one
    during = [message_id("during", i) for i in range(5)]
    publish(staying, during)
    consumer.wait_until(lambda r: delivered_ids(r) >= set(during), 15, "gnsq consumes from the other nsqd")
    assert events(consumer.records(), "disconnected", leaving) == []
    assert leaving.get_json("/drain")["in_flight"] == in_flight

    release.touch()
    released_at = time.monotonic()
    assert exit_code(leaving, 10) == 0
    assert time.monotonic() - released_at < DRAIN_TIMEOUT / 3, "the drain did not wait for its timeout"
    consumer.wait_until(lambda r: bool(events(r, "disconnected", leaving)), 5, "gnsq saw the connection close")
    records = consumer.records()
    finished = [i for i, r in enumerate(records) if r.get("event") == "finished"]
    assert len(finished) == in_flight
    assert events(records, "disconnected", leaving)[0] > max(finished), "closed only after the FINs"
    assert len(held(records)) == in_flight, "nothing new was sent to the consumer once the drain began"
    log = leaving.log()
    assert "nothing left in flight, disconnecting" in log
    assert "still in flight, requeueing" not in log
    assert f"{HELD - in_flight} messages persisted" in log

    leaving.start()
    wait_for(lambda: lookupd.producer_tcp_ports(TOPIC) == {leaving.tcp_port, staying.tcp_port}, 10,
             message="the restarted nsqd registers again")
    disconnected_at = events(consumer.records(), "disconnected", leaving)[0]
    consumer.wait_until(lambda r: any(i > disconnected_at for i in events(r, "connected", leaving)), 15,
                        "gnsq reconnects to the restarted nsqd through lookupd")
    after = [message_id("after", 0)]
    publish(leaving, after)
    published = set(warmups + holds + during + after)
    consumer.wait_until(lambda r: delivered_ids(r) >= published, 20, "gnsq received every message")

    records = consumer.records()
    assert not [r for r in records if r.get("event") == "error"]
    assert_exactly_once(deliveries(records)[CHANNEL], published, "gnsq across the drain")
    assert {r["attempts"] for r in records if "channel" in r} == {1}, "nothing was requeued"
    for nsqd in (leaving, staying):
        wait_for(lambda: (c := nsqd.channel(TOPIC, CHANNEL)) is not None and c["depth"] == 0
                 and c["in_flight_count"] == 0, 10, message=f"{nsqd.tcp_address} holds nothing")
