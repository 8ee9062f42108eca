"""nsqd's Prometheus /metrics: parsed with prometheus_client's own parser and checked
against the numbers /stats gives for the same moment."""
from __future__ import annotations

import gc
import urllib.request
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from nsqd.gc_pauses import GcPauses
from nsqd.metrics import families
from tests.promtool import promtool_problems
from tests.servers import wait_for

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def scrape(url: str) -> tuple[str, dict[str, str], Samples]:
    with urllib.request.urlopen(url, timeout=10) as resp:
        content_type = resp.headers["Content-Type"]
        text = resp.read().decode()
    kinds: dict[str, str] = {}
    samples: Samples = {}
    for family in text_string_to_metric_families(text):
        kinds[family.name] = family.type
        for s in family.samples:
            samples[(s.name, frozenset(s.labels.items()))] = s.value
    return content_type, kinds, samples


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples[(name, frozenset(labels.items()))]


def test_metrics_match_stats(servers: Any, connect: Any, topic: str) -> None:
    nsqd = servers.nsqd(e2e_processing_latency_percentile=["0.99", "0.5"])
    consumer = connect(nsqd)
    consumer.sub(topic, "ch")
    consumer.expect_ok()
    producer = connect(nsqd)
    producer.mpub(topic, [b"one", b"two", b"three", b"four"])
    producer.expect_ok()
    consumer.rdy(1)
    finished = consumer.read_message()
    consumer.fin(finished.id)
    consumer.rdy(1)
    requeued = consumer.read_message()
    consumer.req(requeued.id, 60_000)
    consumer.rdy(1)
    consumer.read_message()  # stays in flight
    wait_for(lambda: nsqd.channel(topic, "ch")["deferred_count"] == 1, 5)

    content_type, kinds, samples = scrape(nsqd.url("/metrics"))
    stats = nsqd.stats(topic=topic)
    t, c = stats["topics"][0], stats["topics"][0]["channels"][0]
    assert content_type == "text/plain; version=0.0.4; charset=utf-8"

    labels = {"topic": topic, "channel": "ch"}
    assert value(samples, "nsq_topic_messages_total", topic=topic) == t["message_count"] == 4
    assert value(samples, "nsq_topic_message_bytes_total", topic=topic) == t["message_bytes"] == 15
    assert value(samples, "nsq_topic_depth", topic=topic) == t["depth"] == 0
    assert value(samples, "nsq_channel_depth", **labels) == c["depth"] == 1
    assert value(samples, "nsq_channel_in_flight", **labels) == c["in_flight_count"] == 1
    assert value(samples, "nsq_channel_deferred", **labels) == c["deferred_count"] == 1
    assert value(samples, "nsq_channel_clients", **labels) == c["client_count"] == 1
    assert value(samples, "nsq_channel_messages_total", **labels) == c["message_count"] == 4
    assert value(samples, "nsq_channel_requeued_total", **labels) == c["requeue_count"] == 1
    assert value(samples, "nsq_channel_timed_out_total", **labels) == 0
    assert value(samples, "nsq_channel_paused", **labels) == 0
    assert value(samples, "nsq_clients") == 2
    assert value(samples, "nsq_healthy") == 1

    latency = {p["quantile"]: p["value"] for p in c["e2e_processing_latency"]["percentiles"]}
    for q in (0.99, 0.5):
        got = value(samples, "nsq_channel_e2e_processing_latency_seconds", quantile=str(q), **labels)
        assert got == latency[q] / 1e9 and got > 0
    assert value(samples, "nsq_channel_e2e_processing_latency_seconds_count", **labels) == 1

    assert kinds["nsq_topic_depth"] == "gauge"
    assert kinds["nsq_channel_messages"] == "counter"  # the parser names counters without _total
    assert kinds["nsq_channel_e2e_processing_latency_seconds"] == "summary"
    assert value(samples, "nsq_gc_runs_total") >= 0 and value(samples, "nsq_memory_heap_objects") > 0


def test_metrics_without_topics_or_percentiles_still_parse(servers: Any, connect: Any, topic: str) -> None:
    nsqd = servers.nsqd()
    _, kinds, samples = scrape(nsqd.url("/metrics"))
    assert value(samples, "nsq_topics") == 0
    assert "nsq_topic_depth" not in kinds

    eph = connect(nsqd)
    eph.sub(f"{topic}#ephemeral", "ch#ephemeral")
    eph.expect_ok()
    _, kinds, samples = scrape(nsqd.url("/metrics"))
    assert value(samples, "nsq_channel_clients", topic=f"{topic}#ephemeral", channel="ch#ephemeral") == 1
    assert "nsq_channel_e2e_processing_latency_seconds" not in kinds  # not tracked without percentiles


class _Fixed:
    def __init__(self, doc: dict[str, Any], pauses: GcPauses) -> None:
        self.doc, self.pauses = doc, pauses

    def collect(self) -> Any:
        return families(self.doc, clients=0, pauses=self.pauses)


def _exposed(doc: dict[str, Any], pauses: GcPauses | None = None) -> dict[str, Any]:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Fixed(doc, pauses or GcPauses()))
    return {f.name: f for f in text_string_to_metric_families(generate_latest(registry).decode())}


def test_label_values_are_escaped() -> None:
    doc = {"version": 'v"1\\\n', "health": "NOK - disk", "start_time": 1, "topics": []}
    exposed = _exposed(doc)
    assert exposed["nsq_info"].samples[0].labels == {"version": 'v"1\\\n'}
    assert exposed["nsq_healthy"].samples[0].value == 0


def test_gc_pauses_are_a_summary_with_quantiles_count_and_sum() -> None:
    pauses = GcPauses()
    for ms in (1, 2, 3, 40):
        pauses._callback("start", {})
        pauses._started -= ms / 1000  # as if the collection had run that long
        pauses._callback("stop", {})
    memory = {"heap_objects": 1, "heap_in_use_bytes": 2, "heap_idle_bytes": 3, "gc_total_runs": 4}
    summary = _exposed({"version": "1", "health": "OK", "start_time": 1, "topics": [], "memory": memory},
                       pauses)["nsq_gc_pause_seconds"]
    assert summary.type == "summary"
    samples = {(s.name, s.labels.get("quantile")): s.value for s in summary.samples}
    assert samples[("nsq_gc_pause_seconds_count", None)] == 4
    assert abs(samples[("nsq_gc_pause_seconds_sum", None)] - 0.046) < 0.001
    assert abs(samples[("nsq_gc_pause_seconds", "1")] - 0.040) < 0.001


def test_promtool_accepts_the_metrics(servers: Any, connect: Any, topic: str) -> None:
    nsqd = servers.nsqd(e2e_processing_latency_percentile=["1.0", "0.99", "0.5"], sync_before_ack=True)
    consumer = connect(nsqd)
    consumer.sub(topic, "ch")
    consumer.expect_ok()
    ephemeral = connect(nsqd)
    ephemeral.sub(f"{topic}#ephemeral", "tail#ephemeral")
    ephemeral.expect_ok()
    producer = connect(nsqd)
    producer.mpub(topic, [b"one", b"two"])
    producer.expect_ok()
    consumer.rdy(2)
    for message in consumer.read_messages(2):
        consumer.fin(message.id)
    wait_for(lambda: nsqd.channel(topic, "ch")["e2e_processing_latency"]["count"] == 2, 5)
    gc.collect()  # at least one pause in the GC summary
    _, kinds, _ = scrape(nsqd.url("/metrics"))
    assert kinds["nsq_gc_pause_seconds"] == kinds["nsq_channel_e2e_processing_latency_seconds"] == "summary"
    assert "process_resident_memory_bytes" in kinds
    with urllib.request.urlopen(nsqd.url("/metrics"), timeout=10) as resp:
        assert promtool_problems(resp.read().decode()) == ""
