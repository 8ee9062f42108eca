"""nsqd's /stats numbers in Prometheus' text exposition format (version 0.0.4).

Gauges for what can go down (depths, in-flight, clients), counters ending in ``_total``
for what only grows, the e2e processing latency percentiles as a summary in seconds.
Labels are ``topic`` and ``channel``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

Labels = dict[str, str]


def escape_label(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def format_labels(labels: Labels) -> str:
    if not labels:
        return ""
    return "{" + ",".join(f'{k}="{escape_label(v)}"' for k, v in labels.items()) + "}"


def format_value(value: float) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int) or float(value).is_integer():
        return str(int(value))
    return repr(float(value))


@dataclass
class Family:
    name: str
    kind: str  # gauge, counter, summary
    help: str
    samples: list[tuple[str, Labels, float]] = field(default_factory=list)

    def add(self, labels: Labels, value: float, suffix: str = "") -> None:
        self.samples.append((self.name + suffix, labels, value))

    def render(self) -> list[str]:
        lines = [f"# HELP {self.name} {self.help}", f"# TYPE {self.name} {self.kind}"]
        lines += [f"{name}{format_labels(labels)} {format_value(value)}" for name, labels, value in self.samples]
        return lines


class Exposition:
    """Families in the order first declared; samples added as the stats are walked."""

    def __init__(self) -> None:
        self.families: dict[str, Family] = {}

    def family(self, name: str, kind: str, help: str) -> Family:
        if name not in self.families:
            self.families[name] = Family(name, kind, help)
        return self.families[name]

    def gauge(self, name: str, help: str, labels: Labels, value: float) -> None:
        self.family(name, "gauge", help).add(labels, value)

    def counter(self, name: str, help: str, labels: Labels, value: float) -> None:
        self.family(name, "counter", help).add(labels, value)

    def latency(self, name: str, help: str, labels: Labels, e2e: dict[str, Any]) -> None:
        """A summary of nanosecond percentiles, in seconds; nothing when not tracked."""
        percentiles = e2e.get("percentiles")
        if percentiles is None:
            return
        summary = self.family(name, "summary", help)
        for p in percentiles:
            summary.add({**labels, "quantile": format_value(p["quantile"])}, p["value"] / 1e9)
        summary.add(labels, e2e.get("count", 0), "_count")

    def render(self) -> str:
        lines: list[str] = []
        for family in self.families.values():
            lines += family.render()
        return "\n".join(lines) + "\n"


def _topic(out: Exposition, topic: dict[str, Any]) -> None:
    labels = {"topic": topic["topic_name"]}
    out.gauge("nsq_topic_depth", "Messages queued in the topic (memory and disk).", labels, topic["depth"])
    out.gauge("nsq_topic_backend_depth", "Messages queued in the topic's disk queue.", labels,
              topic["backend_depth"])
    out.gauge("nsq_topic_paused", "1 when the topic is paused.", labels, bool(topic["paused"]))
    out.gauge("nsq_topic_channels", "Channels of the topic.", labels, len(topic["channels"]))
    out.counter("nsq_topic_messages_total", "Messages published to the topic.", labels, topic["message_count"])
    out.counter("nsq_topic_message_bytes_total", "Bytes of message bodies published to the topic.", labels,
                topic["message_bytes"])
    out.latency("nsq_topic_e2e_processing_latency_seconds",
                "Time from publish to FIN over the window, across the topic's channels.", labels,
                topic["e2e_processing_latency"])


def _channel(out: Exposition, topic_name: str, channel: dict[str, Any]) -> None:
    labels = {"topic": topic_name, "channel": channel["channel_name"]}
    out.gauge("nsq_channel_depth", "Messages queued in the channel (memory and disk).", labels, channel["depth"])
    out.gauge("nsq_channel_backend_depth", "Messages queued in the channel's disk queue.", labels,
              channel["backend_depth"])
    out.gauge("nsq_channel_in_flight", "Messages sent to consumers and not yet finished.", labels,
              channel["in_flight_count"])
    out.gauge("nsq_channel_deferred", "Messages deferred (DPUB or REQ with a delay).", labels,
              channel["deferred_count"])
    out.gauge("nsq_channel_clients", "Consumers subscribed to the channel.", labels, channel["client_count"])
    out.gauge("nsq_channel_paused", "1 when the channel is paused.", labels, bool(channel["paused"]))
    out.counter("nsq_channel_messages_total", "Messages put into the channel.", labels, channel["message_count"])
    out.counter("nsq_channel_requeued_total", "Messages requeued by consumers.", labels, channel["requeue_count"])
    out.counter("nsq_channel_timed_out_total", "Messages whose in-flight timeout expired.", labels,
                channel["timeout_count"])
    out.latency("nsq_channel_e2e_processing_latency_seconds", "Time from publish to FIN over the window.",
                labels, channel["e2e_processing_latency"])


def render(doc: dict[str, Any], clients: int) -> str:
    """``doc`` is /stats' JSON document (stats.collect); ``clients`` the TCP connections."""
    out = Exposition()
    out.gauge("nsq_info", "Always 1; the labels say which nsqd this is.", {"version": doc["version"]}, 1)
    out.gauge("nsq_healthy", "1 while /ping answers OK.", {}, doc["health"] == "OK")
    out.gauge("nsq_start_time_seconds", "When nsqd started, in seconds since the epoch.", {}, doc["start_time"])
    out.gauge("nsq_clients", "TCP client connections.", {}, clients)
    out.gauge("nsq_topics", "Topics.", {}, len(doc["topics"]))
    for topic in doc["topics"]:
        _topic(out, topic)
    for topic in doc["topics"]:
        for channel in topic["channels"]:
            _channel(out, topic["topic_name"], channel)
    memory = doc.get("memory")
    if memory:
        out.gauge("nsq_memory_heap_objects", "Objects allocated by the interpreter.", {}, memory["heap_objects"])
        out.gauge("nsq_memory_resident_bytes", "Resident memory of the process.", {}, memory["heap_in_use_bytes"])
        out.counter("nsq_gc_runs_total", "Garbage collections run.", {}, memory["gc_total_runs"])
    return out.render()
