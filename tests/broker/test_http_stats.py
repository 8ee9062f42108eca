"""/stats: JSON and text, topic and channel filters, include_clients, include_mem and the
per-client counters (end-to-end latency percentiles: test_e2e_latency.py)."""
from __future__ import annotations

import json
import time
from typing import Any, Callable

import pytest

from tests.broker.conftest import Connect
from tests.broker.wire import WireConn
from tests.servers import Nsqd, http, wait_for

Consumer = Callable[..., WireConn]


def _stats(server: Nsqd, query: str) -> Any:
    status, body = http("GET", server.url("/stats?format=json" + query))
    assert status == 200, body
    return json.loads(body)


def _pub(server: Nsqd, topic: str, body: bytes = b"x") -> None:
    assert http("POST", server.url(f"/pub?topic={topic}"), body) == (200, b"OK")


def test_json_document(nsqd: Nsqd, topic: str) -> None:
    _pub(nsqd, topic)
    doc = _stats(nsqd, "")
    assert doc["version"] == "1.3.0" and doc["health"] == "OK"
    assert isinstance(doc["start_time"], int) and doc["start_time"] <= time.time()
    assert doc["producers"] is None or isinstance(doc["producers"], list)  # Go's null for none
    assert {"heap_objects", "heap_in_use_bytes", "gc_total_runs"} <= set(doc["memory"])
    (t,) = [t for t in doc["topics"] if t["topic_name"] == topic]
    assert t["depth"] == 1 and t["backend_depth"] == 0 and t["paused"] is False
    assert t["channels"] == []


def test_topic_and_channel_filters(nsqd: Nsqd, consumer: Consumer, topic: str) -> None:
    other = topic + "-other"
    consumer(nsqd, topic, "a")
    consumer(nsqd, topic, "b")
    consumer(nsqd, other, "a")
    doc = _stats(nsqd, f"&topic={topic}")
    assert [t["topic_name"] for t in doc["topics"]] == [topic]
    assert [c["channel_name"] for c in doc["topics"][0]["channels"]] == ["a", "b"]
    doc = _stats(nsqd, f"&topic={topic}&channel=b")
    assert [c["channel_name"] for t in doc["topics"] for c in t["channels"]] == ["b"]
    unknown = _stats(nsqd, "&topic=never-seen-topic")
    assert unknown["topics"] is None and unknown["producers"] is None  # Go's nulls
    assert _stats(nsqd, f"&topic={topic}&channel=never-seen")["topics"] == []


def test_include_clients_false_leaves_clients_and_producers_out(nsqd: Nsqd, consumer: Consumer,
                                                                connect: Connect, topic: str) -> None:
    consumer(nsqd, topic, "ch")
    publisher = connect(nsqd)
    publisher.pub(topic, b"x")
    publisher.expect_ok()
    with_clients = _stats(nsqd, f"&topic={topic}")
    assert len(with_clients["topics"][0]["channels"][0]["clients"]) == 1
    assert any(p["pub_counts"] == [{"topic": topic, "count": 1}] for p in with_clients["producers"])

    without = _stats(nsqd, f"&topic={topic}&include_clients=false")
    channel = without["topics"][0]["channels"][0]
    assert channel["clients"] is None and channel["client_count"] == 1  # Go's nulls
    assert without["producers"] is None


def test_include_mem_false_leaves_memory_out(nsqd: Nsqd) -> None:
    assert "memory" not in _stats(nsqd, "&include_mem=false")
    assert "memory" in _stats(nsqd, "&include_mem=true")


def test_client_counters(nsqd: Nsqd, consumer: Consumer, topic: str) -> None:
    for i in range(4):
        _pub(nsqd, topic, b"m%d" % i)
    sub = consumer(nsqd, topic, "ch", identify={"client_id": "counted"}, rdy=3)
    msgs = sub.read_messages(3)
    sub.fin(msgs[0].id)
    sub.req(msgs[1].id, 60000)
    sub.nop()

    def settled() -> Any:
        (client,) = _stats(nsqd, f"&topic={topic}")["topics"][0]["channels"][0]["clients"]
        return client if client["finish_count"] == 1 and client["requeue_count"] == 1 else None

    client = wait_for(settled)
    assert client["client_id"] == "counted"
    assert client["ready_count"] == 3
    assert client["message_count"] == 4  # three, then the fourth once FIN and REQ freed room
    assert client["in_flight_count"] == 2
    assert client["state"] == 3  # subscribed
    channel = _stats(nsqd, f"&topic={topic}")["topics"][0]["channels"][0]
    assert channel["in_flight_count"] == 2 and channel["deferred_count"] == 1
    assert channel["requeue_count"] == 1 and channel["message_count"] == 4


def test_text_format(nsqd: Nsqd, consumer: Consumer, topic: str) -> None:
    _pub(nsqd, topic, b"waiting")
    consumer(nsqd, topic, "textual", identify={"client_id": "text-client", "hostname": "text-host"})
    status, body = http("GET", nsqd.url(f"/stats?topic={topic}"))
    assert status == 200
    text = body.decode()
    assert text.startswith("nsqd v1.3.0")
    assert "Health: OK" in text
    topic_line = next(line for line in text.splitlines() if f"[{topic}" in line)
    assert "depth: 0" in topic_line or "depth: 1" in topic_line
    channel_line = next(line for line in text.splitlines() if "[textual" in line)
    assert "depth: 1" in channel_line and "inflt: 0" in channel_line
    assert any("[V2 text-host:" in line for line in text.splitlines())  # Go shows the hostname
    with pytest.raises(ValueError):
        json.loads(text)

