"""Push nsqd's numbers to statsd over UDP, every --statsd-interval, the way nsqd does.

Lines are ``<prefix><name>:<value>|c`` for counters (the increase since the last push)
and ``|g`` for gauges, each ending in a newline, packed whole into datagrams of at most
--statsd-udp-packet-size bytes. The datagrams of one push are spread over the interval
less a second, so a big nsqd does not burst. ``%s`` in --statsd-prefix becomes the
broadcast address and HTTP port with ``.`` and ``:`` turned into ``_``.
"""
from __future__ import annotations

import asyncio
import logging
import socket
from typing import Any, Callable

from nsq_protocol.host_port import join_host_port, split_dial_address

from .background import FailureLog

log = logging.getLogger("nsqd")

EPHEMERAL_SUFFIX = "#ephemeral"
Line = str


def host_key(address: str) -> str:
    return address.replace(".", "_").replace(":", "_")


def expand_prefix(template: str, broadcast_address: str, http_port: int) -> str:
    if not template:
        return ""
    prefix = template.replace("%s", host_key(join_host_port(broadcast_address, http_port)))
    return prefix if prefix.endswith(".") else prefix + "."


def counter(name: str, value: int) -> Line:
    return f"{name}:{value}|c"


def gauge(name: str, value: int) -> Line:
    return f"{name}:{value}|g"


def _latency_gauges(base: str, e2e: dict[str, Any]) -> list[Line]:
    return [gauge(f"{base}.e2e_processing_latency_{p['quantile'] * 100:.0f}", int(p["value"]))
            for p in e2e.get("percentiles") or []]


def _by_name(items: list[dict[str, Any]], key: str) -> dict[str, dict[str, Any]]:
    return {item[key]: item for item in items}


def stats_lines(topics: list[dict[str, Any]], last_topics: list[dict[str, Any]],
                exclude_ephemeral: bool) -> list[Line]:
    """Metric lines (without prefix) from /stats-shaped topics, counters relative to the
    previous push's ``last_topics``."""
    lines: list[Line] = []
    last_by_topic = _by_name(last_topics, "topic_name")
    for topic in topics:
        name = topic["topic_name"]
        if exclude_ephemeral and name.endswith(EPHEMERAL_SUFFIX):
            continue
        last = last_by_topic.get(name, {})
        base = f"topic.{name}"
        lines += [counter(f"{base}.message_count", topic["message_count"] - last.get("message_count", 0)),
                  counter(f"{base}.message_bytes", topic["message_bytes"] - last.get("message_bytes", 0)),
                  gauge(f"{base}.depth", topic["depth"]),
                  gauge(f"{base}.backend_depth", topic["backend_depth"])]
        lines += _latency_gauges(base, topic["e2e_processing_latency"])
        last_channels = _by_name(last.get("channels", []), "channel_name")
        for channel in topic["channels"]:
            cname = channel["channel_name"]
            if exclude_ephemeral and cname.endswith(EPHEMERAL_SUFFIX):
                continue
            was = last_channels.get(cname, {})
            cbase = f"{base}.channel.{cname}"
            lines += [
                counter(f"{cbase}.message_count", channel["message_count"] - was.get("message_count", 0)),
                gauge(f"{cbase}.depth", channel["depth"]),
                gauge(f"{cbase}.backend_depth", channel["backend_depth"]),
                gauge(f"{cbase}.in_flight_count", channel["in_flight_count"]),
                gauge(f"{cbase}.deferred_count", channel["deferred_count"]),
                counter(f"{cbase}.requeue_count", channel["requeue_count"] - was.get("requeue_count", 0)),
                counter(f"{cbase}.timeout_count", channel["timeout_count"] - was.get("timeout_count", 0)),
                gauge(f"{cbase}.clients", channel["client_count"]),
            ]
            lines += _latency_gauges(cbase, channel["e2e_processing_latency"])
    return lines


def memory_lines(memory: dict[str, Any], last_gc_runs: int) -> list[Line]:
    """nsqd's ``mem.*`` lines from /stats' memory section (memory.py says what each means)."""
    gauges = ["heap_objects", "heap_idle_bytes", "heap_in_use_bytes", "heap_released_bytes",
              "gc_pause_usec_100", "gc_pause_usec_99", "gc_pause_usec_95", "next_gc_bytes"]
    return ([gauge(f"mem.{name}", memory[name]) for name in gauges]
            + [counter("mem.gc_runs", memory["gc_total_runs"] - last_gc_runs)])


def pack(lines: list[Line], prefix: str, packet_size: int) -> list[bytes]:
    """Whole lines into datagrams of at most ``packet_size`` bytes (a longer line alone)."""
    packets: list[bytes] = []
    current = bytearray()
    for line in lines:
        data = f"{prefix}{line}\n".encode()
        if current and len(current) + len(data) > packet_size:
            packets.append(bytes(current))
            current.clear()
        current += data
        if len(current) >= packet_size:
            packets.append(bytes(current))
            current.clear()
    if current:
        packets.append(bytes(current))
    return packets


class StatsdPusher:
    """The loop started by NSQD.start when --statsd-address is set."""

    def __init__(self, address: str, prefix: str, interval: float, packet_size: int,
                 mem_stats: bool, exclude_ephemeral: bool,
                 collect: Callable[[], dict[str, Any]]) -> None:
        self.address = address
        self.prefix = prefix
        self.interval = interval
        self.packet_size = packet_size
        self.mem_stats = mem_stats
        self.exclude_ephemeral = exclude_ephemeral
        self._collect = collect
        self._last_topics: list[dict[str, Any]] = []
        self._last_gc_runs = 0
        self._failures = FailureLog(log)

    async def run(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            try:
                await self.push_once()
            except Exception:  # stats are best effort: the next interval tries again
                self._failures.failed("push", "STATSD: push failed")

    def lines(self) -> list[Line]:
        doc = self._collect()
        lines = stats_lines(doc["topics"], self._last_topics, self.exclude_ephemeral)
        self._last_topics = doc["topics"]
        if self.mem_stats and "memory" in doc:
            lines += memory_lines(doc["memory"], self._last_gc_runs)
            self._last_gc_runs = doc["memory"]["gc_total_runs"]
        return lines

    async def push_once(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            host, port = split_dial_address(self.address)
            infos = await loop.getaddrinfo(host, port, type=socket.SOCK_DGRAM)
        except (OSError, ValueError) as e:
            log.error("failed to create UDP socket to statsd(%s): %s", self.address, e)
            return
        family, kind, proto, _, target = infos[0]
        log.info("STATSD: pushing stats to %s", self.address)
        packets = pack(self.lines(), self.prefix, self.packet_size)
        with socket.socket(family, kind, proto) as sock:
            sock.setblocking(False)
            await self._spread(sock, target, packets)

    async def _spread(self, sock: socket.socket, target: Any, packets: list[bytes]) -> None:
        """Send the packets evenly over the interval less a second; on cancellation the
        rest go at once, so a push is never half sent."""
        gap = max(0.0, self.interval - 1.0) / max(1, len(packets))
        for i, packet in enumerate(packets):
            try:
                sock.sendto(packet, target)
            except OSError as e:  # statsd down or the buffer full: stats are best effort
                log.debug("STATSD: send failed: %s", e)
            if gap and i < len(packets) - 1:
                try:
                    await asyncio.sleep(gap)
                except asyncio.CancelledError:
                    for rest in packets[i + 1:]:
                        try:
                            sock.sendto(rest, target)
                        except OSError:
                            pass
                    raise


def pusher_for(nsqd: Any) -> StatsdPusher:
    """The pusher for a started NSQD (its HTTP port is known by then)."""
    from . import stats

    o = nsqd.options
    prefix = expand_prefix(o.statsd_prefix, o.broadcast_address, o.broadcast_http_port or nsqd.http_port)
    return StatsdPusher(
        o.statsd_address, prefix, o.statsd_interval, o.statsd_udp_packet_size, o.statsd_mem_stats,
        o.statsd_exclude_ephemeral,
        collect=lambda: stats.collect(nsqd, include_clients=False, include_mem=o.statsd_mem_stats))
