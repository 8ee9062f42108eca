"""10,000 messages each way between our nsqd and pynsq / gnsq, over three channels.

Each direction is proven against a side we wrote by hand (raw sockets), and finally
third-party producer to third-party consumer. Every body carries a unique ID and a
self-checking filler; per channel the delivered ID set must equal the published one,
with no duplicates, and nsqd's /stats must tell the same story.
"""
from __future__ import annotations

import pytest

from tests.interop import raw_nsq
from tests.interop.checks import (CHANNELS, assert_exactly_once, channel_flags, damaged_bodies,
                                  deliveries, every_channel_has, published_ids,
                                  wait_channels_settled, wait_subscribed)
from tests.interop.client_process import Clients
from tests.interop.clients.bodies import make_body, message_id
from tests.servers import Nsqd, http

pytestmark = pytest.mark.interop

LIBRARIES = ("pynsq", "gnsq")
COUNT = 10_000
CLIENT_TIMEOUT = 60.0


def create_channels(nsqd: Nsqd, topic: str) -> None:
    status, body = http("POST", nsqd.url(f"/topic/create?topic={topic}"))
    assert status == 200, body
    for channel in CHANNELS:
        status, body = http("POST", nsqd.url(f"/channel/create?topic={topic}&channel={channel}"))
        assert status == 200, body


def run_producer(clients: Clients, library: str, nsqd: Nsqd, topic: str, prefix: str,
                 *extra: object) -> set[str]:
    producer = clients.start(f"{library}_producer.py", "--nsqd", nsqd.tcp_address, "--topic", topic,
                             "--prefix", prefix, "--count", COUNT, *extra)
    assert producer.wait_exit(CLIENT_TIMEOUT) == 0, producer.describe()
    acked = published_ids(producer.records())
    assert sorted(acked) == [message_id(prefix, i) for i in range(COUNT)], "each ID acked exactly once"
    return set(acked)


def assert_clean_channels(nsqd: Nsqd, topic: str, library: str | None) -> None:
    """Every channel took COUNT messages, none requeued or timed out; the consumer finished them all."""
    settled = wait_channels_settled(nsqd, topic, CHANNELS, COUNT)
    assert nsqd.topic(topic)["message_count"] == COUNT  # type: ignore[index]
    for name in CHANNELS:
        stats = settled[name]
        assert (stats["requeue_count"], stats["timeout_count"]) == (0, 0), stats
        if library is not None:
            assert stats["clients"], f"{library} consumer still connected to {name}"
            assert all(c["user_agent"].startswith(f"{library}/") for c in stats["clients"]), stats["clients"]
            assert sum(c["finish_count"] for c in stats["clients"]) == COUNT, stats["clients"]


def assert_consumer_got_each_once(records: list[dict], published: set[str], library: str) -> None:
    assert not damaged_bodies(records), damaged_bodies(records)[:3]
    assert {r["attempts"] for r in records if "channel" in r} == {1}
    delivered = deliveries(records)
    assert sorted(delivered) == sorted(CHANNELS)
    for name in CHANNELS:
        assert_exactly_once(delivered[name], published, f"{library} consumer on {name}")


@pytest.mark.parametrize("library", LIBRARIES)
def test_third_party_producer_to_raw_consumers(library: str, shared_nsqd: Nsqd, clients: Clients) -> None:
    topic = f"{library}_pub_to_raw"
    create_channels(shared_nsqd, topic)
    published = run_producer(clients, library, shared_nsqd, topic, f"{library}pub")
    assert shared_nsqd.topic(topic)["message_count"] == COUNT  # type: ignore[index]

    for channel in CHANNELS:
        consumed = raw_nsq.consume(shared_nsqd.tcp_address, topic, channel, COUNT)
        assert not consumed.damaged, consumed.damaged[:3]
        assert consumed.attempts == {1: COUNT}
        assert_exactly_once(consumed.counts, published, f"raw consumer on {channel}")
    assert_clean_channels(shared_nsqd, topic, None)


@pytest.mark.parametrize("library", LIBRARIES)
def test_raw_publisher_to_third_party_consumer(library: str, shared_nsqd: Nsqd, clients: Clients) -> None:
    topic = f"raw_to_{library}"
    consumer = clients.start(f"{library}_consumer.py", "--nsqd", shared_nsqd.tcp_address, "--topic", topic,
                             *channel_flags(*CHANNELS), "--max-in-flight", 200)
    wait_subscribed(shared_nsqd, topic, CHANNELS)
    ids = [message_id("raw", i) for i in range(COUNT)]
    raw_nsq.publish(shared_nsqd.tcp_address, topic, [make_body(i) for i in ids], batch=100)

    consumer.wait_until(lambda r: every_channel_has(r, CHANNELS, COUNT), CLIENT_TIMEOUT,
                        f"{library} consumer saw {COUNT} IDs on each channel")
    assert_clean_channels(shared_nsqd, topic, library)
    consumer.stop()
    assert_consumer_got_each_once(consumer.records(), set(ids), library)


@pytest.mark.parametrize(("producer_library", "consumer_library"),
                         [("pynsq", "pynsq"), ("gnsq", "gnsq"), ("pynsq", "gnsq"), ("gnsq", "pynsq")])
def test_third_party_producer_to_third_party_consumer(producer_library: str, consumer_library: str,
                                                      shared_nsqd: Nsqd, clients: Clients) -> None:
    topic = f"{producer_library}_to_{consumer_library}"
    consumer = clients.start(f"{consumer_library}_consumer.py", "--nsqd", shared_nsqd.tcp_address,
                             "--topic", topic, *channel_flags(*CHANNELS), "--max-in-flight", 200)
    wait_subscribed(shared_nsqd, topic, CHANNELS)
    published = run_producer(clients, producer_library, shared_nsqd, topic, f"{producer_library}mpub",
                             "--mpub-batch", 100)

    consumer.wait_until(lambda r: every_channel_has(r, CHANNELS, COUNT), CLIENT_TIMEOUT,
                        f"{consumer_library} consumer saw {COUNT} IDs on each channel")
    assert_clean_channels(shared_nsqd, topic, consumer_library)
    consumer.stop()
    assert_consumer_got_each_once(consumer.records(), published, consumer_library)


@pytest.mark.parametrize("codec", ["deflate", "snappy"])
def test_raw_publisher_to_gnsq_consumer_over_compressed_connection(codec: str, shared_nsqd: Nsqd,
                                                                  clients: Clients) -> None:
    topic = f"raw_to_gnsq_{codec}"
    consumer = clients.start("gnsq_consumer.py", "--nsqd", shared_nsqd.tcp_address, "--topic", topic,
                             *channel_flags(*CHANNELS), "--max-in-flight", 200, f"--{codec}")
    wait_subscribed(shared_nsqd, topic, CHANNELS)
    for channel in shared_nsqd.topic(topic)["channels"]:  # type: ignore[index]
        assert [c[codec] for c in channel["clients"]] == [True], channel["clients"]
    ids = [message_id(codec, i) for i in range(COUNT)]
    raw_nsq.publish(shared_nsqd.tcp_address, topic, [make_body(i) for i in ids], batch=100)

    consumer.wait_until(lambda r: every_channel_has(r, CHANNELS, COUNT), CLIENT_TIMEOUT,
                        f"gnsq consumer ({codec}) saw {COUNT} IDs on each channel")
    assert_clean_channels(shared_nsqd, topic, "gnsq")
    consumer.stop()
    assert_consumer_got_each_once(consumer.records(), set(ids), f"gnsq ({codec})")
