"""nsqd's /stats numbers for Prometheus, exposed with prometheus_client: a custom
collector walks the same document /stats answers with at every scrape, beside
prometheus_client's own process collector (CPU, memory, file descriptors).

Gauges for what can go down (depths, in-flight, clients), counters for what only grows,
summaries for latencies: the e2e processing latency percentiles (seconds, over the
--e2e-processing-latency-window-time window, with that window's count and sum) and the
interpreter's GC pauses (percentiles of the last 256, count and sum since start). Labels
are ``topic`` and ``channel``.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterator

from prometheus_client import CollectorRegistry, ProcessCollector
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import choose_encoder
from prometheus_client.registry import Collector

from . import stats
from .gc_pauses import PROCESS_PAUSES, GcPauses

if TYPE_CHECKING:
    from .group_commit import GroupCommitter
    from .nsqd import NSQD

TOPIC_LABELS = ["topic"]
CHANNEL_LABELS = ["topic", "channel"]


class _Families:
    """Families by name, each created once with its help text, in the order first used."""

    def __init__(self) -> None:
        self.by_name: dict[str, Metric] = {}

    def gauge(self, name: str, help: str, labels: list[str], values: list[str], value: float) -> None:
        family = self.by_name.setdefault(name, GaugeMetricFamily(name, help, labels=labels))
        family.add_metric(values, float(value))  # type: ignore[attr-defined]

    def counter(self, name: str, help: str, labels: list[str], values: list[str], value: float) -> None:
        family = self.by_name.setdefault(name, CounterMetricFamily(name, help, labels=labels))
        family.add_metric(values, float(value))  # type: ignore[attr-defined]

    def summary(self, name: str, help: str, labels: dict[str, str], quantiles: dict[float, float],
                count: float, total: float) -> None:
        """A summary with quantiles (prometheus_client's SummaryMetricFamily has none)."""
        family = self.by_name.setdefault(name, Metric(name, help, "summary"))
        for quantile, value in quantiles.items():
            family.add_sample(name, {**labels, "quantile": _quantile_label(quantile)}, value)
        family.add_sample(name + "_count", labels, count)
        family.add_sample(name + "_sum", labels, total)


def _quantile_label(quantile: float) -> str:
    return str(int(quantile)) if float(quantile).is_integer() else repr(float(quantile))


def _latency(out: _Families, name: str, help: str, labels: dict[str, str], e2e: dict[str, Any]) -> None:
    """A summary of /stats' nanosecond percentiles in seconds; nothing when not tracked."""
    percentiles = e2e.get("percentiles")
    if percentiles is None:
        return
    quantiles = {p["quantile"]: p["value"] / 1e9 for p in percentiles}
    out.summary(name, help, labels, quantiles, e2e.get("count", 0), e2e.get("sum_seconds", 0.0))


def _topic(out: _Families, topic: dict[str, Any]) -> None:
    name = [topic["topic_name"]]
    out.gauge("nsq_topic_depth", "Messages queued in the topic (memory and disk).", TOPIC_LABELS, name, topic["depth"])
    out.gauge("nsq_topic_backend_depth", "Messages queued in the topic's disk queue.", TOPIC_LABELS, name,
              topic["backend_depth"])
    out.gauge("nsq_topic_paused", "1 when the topic is paused.", TOPIC_LABELS, name, bool(topic["paused"]))
    out.gauge("nsq_topic_channels", "Channels of the topic.", TOPIC_LABELS, name, len(topic["channels"]))
    out.counter("nsq_topic_messages_total", "Messages published to the topic.", TOPIC_LABELS, name,
                topic["message_count"])
    out.counter("nsq_topic_message_bytes_total", "Bytes of message bodies published to the topic.", TOPIC_LABELS,
                name, topic["message_bytes"])
    _latency(out, "nsq_topic_e2e_processing_latency_seconds",
             "Time from publish to FIN over the window, across the topic's channels.",
             {"topic": topic["topic_name"]}, topic["e2e_processing_latency"])


def _channel(out: _Families, topic_name: str, channel: dict[str, Any]) -> None:
    names = [topic_name, channel["channel_name"]]
    out.gauge("nsq_channel_depth", "Messages queued in the channel (memory and disk).", CHANNEL_LABELS, names,
              channel["depth"])
    out.gauge("nsq_channel_backend_depth", "Messages queued in the channel's disk queue.", CHANNEL_LABELS, names,
              channel["backend_depth"])
    out.gauge("nsq_channel_in_flight", "Messages sent to consumers and not yet finished.", CHANNEL_LABELS, names,
              channel["in_flight_count"])
    out.gauge("nsq_channel_deferred", "Messages deferred (DPUB or REQ with a delay).", CHANNEL_LABELS, names,
              channel["deferred_count"])
    out.gauge("nsq_channel_clients", "Consumers subscribed to the channel.", CHANNEL_LABELS, names,
              channel["client_count"])
    out.gauge("nsq_channel_paused", "1 when the channel is paused.", CHANNEL_LABELS, names, bool(channel["paused"]))
    out.counter("nsq_channel_messages_total", "Messages put into the channel.", CHANNEL_LABELS, names,
                channel["message_count"])
    out.counter("nsq_channel_requeued_total", "Messages requeued by consumers.", CHANNEL_LABELS, names,
                channel["requeue_count"])
    out.counter("nsq_channel_timed_out_total", "Messages whose in-flight timeout expired.", CHANNEL_LABELS, names,
                channel["timeout_count"])
    _latency(out, "nsq_channel_e2e_processing_latency_seconds", "Time from publish to FIN over the window.",
             {"topic": topic_name, "channel": channel["channel_name"]}, channel["e2e_processing_latency"])


def _drain(out: _Families, doc: dict[str, Any]) -> None:
    """Readiness and a drain's progress: what a rolling upgrade or scale-down waits on."""
    drain = doc.get("drain") or {}
    draining = bool(drain.get("draining"))
    out.gauge("nsq_ready", "1 while /ready answers 200: healthy and not draining.", [], [],
              doc["health"] == "OK" and not draining)
    out.gauge("nsq_draining", "1 from the moment a drain starts (POST /drain or SIGTERM).", [], [], draining)
    out.gauge("nsq_drain_in_flight", "Messages in flight a running drain still waits for (0 when none runs).", [], [],
              drain.get("in_flight") or 0 if draining else 0)
    handoff = drain.get("handoff")
    if isinstance(handoff, dict):
        out.gauge("nsq_handoff_messages_left", "A scale-down's backlog still on this nsqd's disk, not yet handed "
                  "to the nsqds that stay.", [], [], handoff.get("messages_left") or 0)


def families(doc: dict[str, Any], clients: int, durable: "GroupCommitter | None" = None,
             pauses: GcPauses = PROCESS_PAUSES) -> list[Metric]:
    """The metric families for ``doc`` (stats.collect's document); ``clients`` the TCP
    connections; ``durable`` the group committer of --sync-before-ack, when it is on."""
    out = _Families()
    out.gauge("nsq_info", "Always 1; the labels say which nsqd this is.", ["version"], [doc["version"]], 1)
    out.gauge("nsq_healthy", "1 while /ping answers OK.", [], [], doc["health"] == "OK")
    out.gauge("nsq_start_time_seconds", "When nsqd started, in seconds since the epoch.", [], [], doc["start_time"])
    out.gauge("nsq_clients", "TCP client connections.", [], [], clients)
    _drain(out, doc)
    topics = doc["topics"] or []
    out.gauge("nsq_topics", "Topics.", [], [], len(topics))
    for topic in topics:
        _topic(out, topic)
    for topic in topics:
        for channel in topic["channels"]:
            _channel(out, topic["topic_name"], channel)
    memory = doc.get("memory")
    if memory:
        out.gauge("nsq_memory_heap_objects", "Objects allocated by the interpreter.", [], [], memory["heap_objects"])
        out.gauge("nsq_memory_resident_bytes", "Resident anonymous memory of the process (its heap).", [], [],
                  memory["heap_in_use_bytes"])
        out.gauge("nsq_memory_heap_idle_bytes", "Bytes malloc holds free for reuse.", [], [],
                  memory["heap_idle_bytes"])
        out.summary("nsq_gc_pause_seconds", "Garbage collection pauses: percentiles of the last 256, "
                    "count and total since start.", {}, pauses.quantiles(), pauses.count, pauses.total_seconds)
        out.counter("nsq_gc_runs_total", "Garbage collections run.", [], [], memory["gc_total_runs"])
    if durable is not None:
        # publishes per round is how many publishers shared each fsync
        out.counter("nsq_durable_sync_rounds_total",
                    "Durable mode: fsync rounds (group commits) that acknowledged at least one publish.", [], [],
                    durable.acknowledging_rounds)
        out.counter("nsq_durable_synced_publishes_total",
                    "Durable mode: publish commands (PUB, MPUB, DPUB, HTTP pub and mpub) acknowledged by those rounds.",
                    [], [], durable.acknowledged_publishes)
    return list(out.by_name.values())


class NsqdCollector(Collector):
    """Walks nsqd's stats at every scrape."""

    def __init__(self, nsqd: "NSQD") -> None:
        self.nsqd = nsqd

    def collect(self) -> Iterator[Metric]:
        doc = stats.collect(self.nsqd, include_clients=False, include_mem=True, with_latency_sums=True)
        yield from families(doc, clients=len(self.nsqd.clients), durable=self.nsqd.committer)


class Exposition:
    """nsqd's registry (its collector and prometheus_client's process collector), made
    once; importing this module is what loads prometheus_client, so nsqd does it at the
    first scrape."""

    def __init__(self, nsqd: "NSQD") -> None:
        self._registry = CollectorRegistry(auto_describe=False)
        for collector in (NsqdCollector(nsqd), ProcessCollector(registry=None)):
            self._registry.register(collector)

    def render(self, accept: str) -> tuple[bytes, str]:
        """The registry in the format the scraper's Accept header asks for (Prometheus'
        text format by default, OpenMetrics when asked): body and Content-Type."""
        encoder, content_type = choose_encoder(accept)
        return encoder(self._registry), content_type
