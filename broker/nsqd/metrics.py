"""nsqd's /stats numbers in Prometheus' text exposition format.

Gauges for what can go down (depths, in-flight, clients), counters ending in ``_total``
for what only grows, the e2e processing latency percentiles as a summary in seconds.
Labels are ``topic`` and ``channel``.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from nsq_protocol.prometheus import CONTENT_TYPE, Exposition, escape_label

if TYPE_CHECKING:
    from .group_commit import GroupCommitter

__all__ = ["CONTENT_TYPE", "escape_label", "render"]


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


def render(doc: dict[str, Any], clients: int, durable: "GroupCommitter | None" = None) -> str:
    """``doc`` is /stats' JSON document (stats.collect); ``clients`` the TCP connections;
    ``durable`` the group committer of --sync-before-ack, when it is on."""
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
        out.gauge("nsq_memory_resident_bytes", "Resident anonymous memory of the process (its heap).", {},
                  memory["heap_in_use_bytes"])
        out.gauge("nsq_memory_heap_idle_bytes", "Bytes malloc holds free for reuse.", {}, memory["heap_idle_bytes"])
        for percent, quantile in ((100, "1"), (99, "0.99"), (95, "0.95")):
            out.gauge("nsq_gc_pause_seconds", "Garbage collection pauses over the last 256 collections.",
                      {"quantile": quantile}, memory[f"gc_pause_usec_{percent}"] / 1e6)
        out.counter("nsq_gc_runs_total", "Garbage collections run.", {}, memory["gc_total_runs"])
    if durable is not None:
        # publishes per round is how many publishers shared each fsync
        out.counter("nsq_durable_sync_rounds_total",
                    "Durable mode: fsync rounds (group commits) that acknowledged at least one publish.", {},
                    durable.acknowledging_rounds)
        out.counter("nsq_durable_synced_publishes_total",
                    "Durable mode: publish commands (PUB, MPUB, DPUB, HTTP pub and mpub) acknowledged by those rounds.",
                    {}, durable.acknowledged_publishes)
    return out.render()
