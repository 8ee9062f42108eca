"""/stats: nsqd's numbers as JSON (NSQ's shape) and as NSQ's plain-text report."""
from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING

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
                  window: float) -> dict:
    clients = [c.stats() for c in channel.clients.values()] if include_clients else []
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
        "e2e_processing_latency": e2e_latency.percentiles(_windows([channel]), percentiles),
    }


def topic_stats(topic: Topic, channel_filter: str, include_clients: bool,
                percentiles: list[float], window: float) -> dict | None:
    if channel_filter:
        chosen = [topic.channels[channel_filter]] if channel_filter in topic.channels else None
        if chosen is None:
            return None
    else:
        chosen = sorted(topic.channels.values(), key=lambda c: c.name)
    channels = [channel_stats(c, include_clients, percentiles, window) for c in chosen]
    return {
        "topic_name": topic.name,
        "channels": channels,
        "depth": topic.depth,
        "backend_depth": topic.backend.depth,
        "message_count": topic.message_count,
        "message_bytes": topic.message_bytes,
        "paused": topic.paused,
        "e2e_processing_latency": e2e_latency.percentiles(_windows(chosen), percentiles),
    }


def collect(nsqd: "NSQD", topic_filter: str = "", channel_filter: str = "",
            include_clients: bool = True, include_mem: bool = True) -> dict:
    opts = nsqd.options
    if topic_filter:
        topics = [nsqd.topics[topic_filter]] if topic_filter in nsqd.topics else []
    else:
        topics = sorted(nsqd.topics.values(), key=lambda t: t.name)
    topic_list = []
    for t in topics:
        s = topic_stats(t, channel_filter, include_clients, opts.e2e_processing_latency_percentiles,
                        opts.e2e_processing_latency_window_time)
        if s is not None:
            topic_list.append(s)
    producers = []
    if include_clients:
        producers = [c.stats(topic_filter) for c in nsqd.clients.values() if c.pub_counts]
    doc: dict = {
        "version": nsqd.version,
        "health": nsqd.health,
        "start_time": nsqd.start_time,
        "topics": topic_list,
    }
    if include_mem:
        doc["memory"] = memory_stats()
    doc["producers"] = producers
    doc["drain"] = nsqd.drain.state()
    return doc


def _uptime(seconds: float) -> str:
    seconds = int(seconds)
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return (f"{h}h" if h else "") + (f"{m}m" if h or m else "") + f"{s}s"


def render_text(doc: dict, uptime: float) -> str:
    lines = [f"nsqd v{doc['version']} (built w/python{sys.version_info.major}.{sys.version_info.minor})",
             f"start_time {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(doc['start_time']))}",
             f"uptime {_uptime(uptime)}", "", f"Health: {doc['health']}", ""]
    if "memory" in doc:
        lines.append("Memory:")
        for key, value in doc["memory"].items():
            lines.append(f"   {key:<25} {value}")
        lines.append("")
    if not doc["topics"]:
        lines.append("NO_TOPICS")
    else:
        lines.append("Topics:")
    for t in doc["topics"]:
        paused = " *P" if t["paused"] else "   "
        lines.append(f"   [{t['topic_name']:<15}] depth: {t['depth']:<5} be-depth: {t['backend_depth']:<5} "
                     f"msgs: {t['message_count']:<8}{paused}")
        for c in t["channels"]:
            paused = " *P" if c["paused"] else "   "
            lines.append(f"      [{c['channel_name']:<25}] depth: {c['depth']:<5} be-depth: {c['backend_depth']:<5} "
                         f"inflt: {c['in_flight_count']:<4} def: {c['deferred_count']:<4} "
                         f"re-q: {c['requeue_count']:<5} timeout: {c['timeout_count']:<5} "
                         f"msgs: {c['message_count']:<8}{paused}")
            for cl in c["clients"]:
                connected = _uptime(time.time() - cl["connect_ts"])
                lines.append(f"        [{cl['version']} {cl['client_id']:<20}] state: {cl['state']} "
                             f"inflt: {cl['in_flight_count']:<4} rdy: {cl['ready_count']:<4} "
                             f"fin: {cl['finish_count']:<8} re-q: {cl['requeue_count']:<8} "
                             f"msgs: {cl['message_count']:<8} connected: {connected}")
    if doc.get("producers"):
        lines += ["", "Producers:"]
        for p in doc["producers"]:
            lines.append(f"   [{p['version']} {p['client_id']:<20}] msgs: {sum(x['count'] for x in p['pub_counts'])} "
                         f"connected: {_uptime(time.time() - p['connect_ts'])}")
            for pc in p["pub_counts"]:
                lines.append(f"      [{pc['topic']:<15}] msgs: {pc['count']}")
    return "\n".join(lines) + "\n"
