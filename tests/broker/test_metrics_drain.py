"""nsqd's readiness and a drain's progress in /metrics (what the chart's dashboard and
alerts read during a rolling upgrade): ready and not draining at first; once POST /drain
starts with a message in flight, not ready, draining, that message counted, matching
GET /drain."""
from __future__ import annotations

from typing import Any

from tests.broker.test_metrics import scrape, value
from tests.servers import wait_for


def test_metrics_follow_a_drain(servers: Any, connect: Any, topic: str) -> None:
    nsqd = servers.nsqd(drain_timeout="30s")
    _, _, samples = scrape(nsqd.url("/metrics"))
    assert (value(samples, "nsq_ready"), value(samples, "nsq_draining"), value(samples, "nsq_drain_in_flight")) == \
        (1, 0, 0)
    consumer = connect(nsqd)
    consumer.sub(topic, "ch")
    consumer.expect_ok()
    producer = connect(nsqd)
    producer.pub(topic, b"held")
    producer.expect_ok()
    consumer.rdy(1)
    consumer.read_message()  # held in flight: the drain waits for it
    assert nsqd.post("/drain").status == 200

    def drained_state() -> Any:
        _, _, now = scrape(nsqd.url("/metrics"))
        return now if value(now, "nsq_draining") == 1 else None
    samples = wait_for(drained_state, 5, message="nsq_draining 1")
    assert value(samples, "nsq_ready") == 0
    assert value(samples, "nsq_drain_in_flight") == nsqd.get_json("/drain")["in_flight"] == 1
    assert ("nsq_handoff_messages_left", frozenset()) not in samples  # a plain drain hands nothing off
