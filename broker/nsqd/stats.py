"""/stats: nsqd's numbers as JSON and as the plain-text report, both in Go nsqd's shape:
``null`` where Go has it (an unknown topic's ``topics`` and ``producers``, ``clients``
and ``producers`` without ``include_clients``, no producers at all), client keys Go
leaves out when empty left out, the text's columns as Go prints them."""
from __future__ import annotations

import datetime
import time
from typing import TYPE_CHECKING, Any

from nsq_protocol.flags import format_duration
from nsq_protocol.host_port import split_host_port

from . import e2e_latency
from .channel import Channel
from .e2e_latency import LatencyWindow
from .memory import memory_stats
from .topic import Topic

if TYPE_CHECKING:
    from .nsqd import NSQD


def _windows(channels: list[Channel]) -> list[LatencyWindow]:
    return [c.e2e_latency for c in channels if c.e2e_latency is not None]


def channel_stats(channel: Channel, include_clients: bool, percentiles: list[float],
                  window: float, latency_sums: bool = False) -> dict:
    clients = [c.stats() for c in channel.clients.values()] if include_clients else None
    return {
        "channel_name": channel.name,
        "depth": channel.depth,
        "backend_depth": channel.backend.depth,
        "in_flight_count": len(channel.in_flight),
        "deferred_count": len(channel.deferred),
        "message_count": channel.message_count,
        "requeue_count": channel.requeue_count,
        "timeout_count": channel.timeout_count,
        "client_count": len(channel.clients),
        "clients": clients,
        "paused": channel.paused,
        "e2e_processing_latency": e2e_latency.percentiles(_windows([channel]), percentiles, latency_sums),
    }


def topic_stats(topic: Topic, channel_filter: str, include_clients: bool,
                percentiles: list[float], window: float, latency_sums: bool = False) -> dict | None:
    if channel_filter:
        chosen = [topic.channels[channel_filter]] if channel_filter in topic.channels else None
        if chosen is None:
            return None
    else:
        chosen = sorted(topic.channels.values(), key=lambda c: c.name)
    channels = [channel_stats(c, include_clients, percentiles, window, latency_sums) for c in chosen]
    return {
        "topic_name": topic.name,
        "channels": channels,
        "depth": topic.depth,
        "backend_depth": topic.backend.depth,
        "message_count": topic.message_count,
        "message_bytes": topic.message_bytes,
        "paused": topic.paused,
        # over every channel, whichever were asked for, as Go aggregates it
        "e2e_processing_latency": e2e_latency.percentiles(_windows(list(topic.channels.values())), percentiles,
                                                          latency_sums),
    }


def collect(nsqd: "NSQD", topic_filter: str = "", channel_filter: str = "",
            include_clients: bool = True, include_mem: bool = True, with_latency_sums: bool = False) -> dict:
    """The /stats document; ``with_latency_sums`` adds each latency window's total
    (``sum_seconds``, for /metrics; Go's /stats has no such key)."""
    opts = nsqd.options
    doc: dict[str, Any] = {"version": nsqd.version, "health": nsqd.health, "start_time": nsqd.start_time}
    topic_list: list[dict] | None = None
    producers: list[dict] | None = None
    if not topic_filter or topic_filter in nsqd.topics:
        if topic_filter:
            topics = [nsqd.topics[topic_filter]]
        else:
            topics = sorted(nsqd.topics.values(), key=lambda t: t.name)
        topic_list = []
        for t in topics:
            s = topic_stats(t, channel_filter, include_clients, opts.e2e_processing_latency_percentiles,
                            opts.e2e_processing_latency_window_time, with_latency_sums)
            if s is not None:
                topic_list.append(s)
        if include_clients:
            producers = [c.stats(topic_filter) for c in nsqd.clients.values() if c.pub_counts] or None
    doc["topics"] = topic_list
    if include_mem:
        doc["memory"] = memory_stats()
    doc["producers"] = producers
    doc["drain"] = nsqd.drain.state()
    return doc


def _since(timestamp: float, now: float) -> str:
    """Go's ``time.Since(t).Truncate(time.Second)``."""
    return format_duration(max(0, int(now - timestamp)))


def _rfc3339(timestamp: float) -> str:
    """Go's ``Time.Format(time.RFC3339)`` in local time (``Z`` for UTC)."""
    text = datetime.datetime.fromtimestamp(int(timestamp)).astimezone().isoformat(timespec="seconds")
    return text[:-6] + "Z" if text.endswith("+00:00") else text


def _latency(result: dict) -> str:
    """Go's e2e column: each percentile in the largest unit it exceeds, one decimal."""
    shown = []
    for item in result["percentiles"] or []:
        value, unit = float(item["value"]), "ns"
        for size, name in ((1e9, "s"), (1e6, "ms"), (1e3, "us")):
            if value > size:
                value, unit = value / size, name
                break
        shown.append(f"{value:.1f}{unit}")
    return ", ".join(shown)


def _client_line(client: dict, now: float) -> str:
    port = split_host_port(client["remote_address"])[1]
    name = f"{client['hostname']}:{port} {client['user_agent']}"
    connected = _since(client["connect_ts"], now)
    pub_counts = client.get("pub_counts")
    if pub_counts:
        topics = ",".join(f"{pc['topic']}={pc['count']}" for pc in pub_counts)
        return (f"[{client['version']} {name:<21}] msgs: {sum(pc['count'] for pc in pub_counts):<8} "
                f"topics: {topics} connected: {connected}")
    return (f"[{client['version']} {name:<21}] state: {client['state']} "
            f"inflt: {client['in_flight_count']:<4} rdy: {client['ready_count']:<4} "
            f"fin: {client['finish_count']:<8} re-q: {client['requeue_count']:<8} "
            f"msgs: {client['message_count']:<8} connected: {connected}")


def render_text(doc: dict, python_version: str, started: float, now: float) -> str:
    """``/stats`` without ``format=json``: Go nsqd's report, line for line."""
    out = [f"nsqd v{doc['version']} (built w/{python_version})\n",
           f"start_time {_rfc3339(doc['start_time'])}\n",
           f"uptime {format_duration(now - started)}\n",
           f"\nHealth: {doc['health']}\n"]
    if "memory" in doc:
        out.append("\nMemory:\n")
        out += [f"   {key:<25}\t{value}\n" for key, value in doc["memory"].items()]
    topics = doc["topics"] or []
    out.append("\nTopics:" if topics else "\nTopics: None\n")
    for t in topics:
        out.append(f"\n{'*P ' if t['paused'] else '   '}[{t['topic_name']:<15}] depth: {t['depth']:<5} "
                   f"be-depth: {t['backend_depth']:<5} msgs: {t['message_count']:<8} "
                   f"e2e%: {_latency(t['e2e_processing_latency'])}\n")
        for c in t["channels"]:
            out.append(f"{'   *P ' if c['paused'] else '      '}[{c['channel_name']:<25}] depth: {c['depth']:<5} "
                       f"be-depth: {c['backend_depth']:<5} inflt: {c['in_flight_count']:<4} "
                       f"def: {c['deferred_count']:<4} re-q: {c['requeue_count']:<5} "
                       f"timeout: {c['timeout_count']:<5} msgs: {c['message_count']:<8} "
                       f"e2e%: {_latency(c['e2e_processing_latency'])}\n")
            out += [f"        {_client_line(client, now)}\n" for client in c["clients"] or []]
    producers = doc["producers"] or []
    out.append("\nProducers:\n" if producers else "\nProducers: None\n")
    out += [f"   {_client_line(p, now)}\n" for p in producers]
    return "".join(out)
