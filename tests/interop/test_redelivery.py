"""REQ and message-timeout redelivery as pynsq's Reader and gnsq's Consumer see them.

A handler that requeues each message once must get it back with attempts 2; a handler
that never answers the first attempt must get it back after nsqd's --msg-timeout.
nsqd's requeue/timeout counters must count exactly those redeliveries.
"""
from __future__ import annotations

import pytest

from tests.conftest import Servers
from tests.interop import raw_nsq
from tests.interop.checks import (assert_exactly_once, channel_flags, damaged_bodies, deliveries,
                                  wait_channels_settled, wait_subscribed)
from tests.interop.client_process import Clients, Record
from tests.interop.clients.bodies import WARMUP_PREFIX, make_body, message_id
from tests.servers import Nsqd

pytestmark = pytest.mark.interop

LIBRARIES = ("pynsq", "gnsq")
COUNT = 50
CHANNEL = "redelivery"
MSG_TIMEOUT = 1.0
# nsqd's queue scan may notice an expired message a little late; NSQ's own suite allows 8 s.
TIMEOUT_SLACK = 8.0
# the client stamps a delivery after nsqd sent it, so a gap may look slightly short
CLOCK_SLACK = 0.25


def seen_twice(records: list[Record]) -> bool:
    return len(deliveries(records, attempts=2).get(CHANNEL, ())) >= COUNT


def run_consumer_against_published(clients: Clients, library: str, nsqd: Nsqd, topic: str,
                                   mode: str) -> tuple[list[Record], dict]:
    """Publish one warm-up message, then COUNT test messages; return the test messages'
    deliveries (each checked seen exactly once at attempt 1 and once at attempt 2)."""
    consumer = clients.start(f"{library}_consumer.py", "--nsqd", nsqd.tcp_address, "--topic", topic,
                             *channel_flags(CHANNEL), "--mode", mode, "--max-in-flight", COUNT * 2)
    wait_subscribed(nsqd, topic, [CHANNEL])
    warmup = message_id(WARMUP_PREFIX, 0)
    raw_nsq.publish(nsqd.tcp_address, topic, [make_body(warmup)], batch=1)
    wait_channels_settled(nsqd, topic, [CHANNEL], 1)

    ids = [message_id(mode, i) for i in range(COUNT)]
    raw_nsq.publish(nsqd.tcp_address, topic, [make_body(i) for i in ids], batch=10)
    consumer.wait_until(seen_twice, 30, f"{library} saw every message a second time")
    stats = wait_channels_settled(nsqd, topic, [CHANNEL], COUNT + 1)[CHANNEL]
    consumer.stop()
    records = [r for r in consumer.records() if r.get("id") != warmup]
    assert not damaged_bodies(records)
    published = set(ids)
    for attempts in (1, 2):
        assert_exactly_once(deliveries(records, attempts)[CHANNEL], published,
                            f"{library} attempt {attempts}")
    assert {r["attempts"] for r in records if "channel" in r} == {1, 2}
    return records, stats


@pytest.mark.parametrize("library", LIBRARIES)
def test_requeued_message_comes_back_with_attempts_2(library: str, shared_nsqd: Nsqd,
                                                    clients: Clients) -> None:
    records, stats = run_consumer_against_published(clients, library, shared_nsqd,
                                                       f"{library}_requeue", "requeue-once")
    assert (stats["requeue_count"], stats["timeout_count"]) == (COUNT, 0), stats
    first_ids = {r["msg_id"]: r["id"] for r in records if r["attempts"] == 1}
    second_ids = {r["msg_id"]: r["id"] for r in records if r["attempts"] == 2}
    assert first_ids == second_ids, "a requeued message keeps its nsqd message ID"


@pytest.mark.parametrize("library", LIBRARIES)
def test_unanswered_message_comes_back_after_msg_timeout(library: str, servers: Servers,
                                                         clients: Clients) -> None:
    nsqd = servers.nsqd(msg_timeout=f"{int(MSG_TIMEOUT * 1000)}ms")
    records, stats = run_consumer_against_published(clients, library, nsqd,
                                                       f"{library}_timeout", "timeout-once")
    assert (stats["requeue_count"], stats["timeout_count"]) == (0, COUNT), stats
    first_seen = {r["id"]: float(r["t"]) for r in records if r["attempts"] == 1}  # type: ignore[arg-type]
    second_seen = {r["id"]: float(r["t"]) for r in records if r["attempts"] == 2}  # type: ignore[arg-type]
    gaps = sorted(second_seen[i] - first_seen[i] for i in first_seen)
    assert gaps[0] >= MSG_TIMEOUT - CLOCK_SLACK, f"redelivered before --msg-timeout: {gaps[:3]}"
    assert gaps[-1] <= MSG_TIMEOUT + TIMEOUT_SLACK, f"redelivered far too late: {gaps[-3:]}"
