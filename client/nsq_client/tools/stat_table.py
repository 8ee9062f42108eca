"""nsq_stat's table: one channel's numbers summed over every nsqd that has it, and the
lines NSQ's ``nsq_stat`` prints for them (same columns, widths and header).

    ------rate------+----------------depth----------------+--------------metadata---------------
    ingress  egress |   total     mem    disk inflt   def |     req     t-o         msgs clients
         50      48 |     120     100      20     3     0 |       0       0        10500       2

Rates are per second over the polling interval: ingress is how many messages the
channel received, egress how many left it (received minus the growth of the depth).
"""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Iterable

HEADER_GROUPS = ("------rate------" + "+" + "----------------depth----------------" + "+"
                 + "--------------metadata---------------")
_COLUMNS = ("ingress", "egress", "total", "mem", "disk", "inflt", "def", "req", "t-o", "msgs", "clients")


@dataclass(frozen=True, slots=True)
class ChannelTotals:
    depth: int = 0
    memory_depth: int = 0
    backend_depth: int = 0
    in_flight: int = 0
    deferred: int = 0
    requeued: int = 0
    timed_out: int = 0
    messages: int = 0
    clients: int = 0

    def __add__(self, other: "ChannelTotals") -> "ChannelTotals":
        return ChannelTotals(*(getattr(self, f.name) + getattr(other, f.name) for f in fields(self)))

    @classmethod
    def from_stats(cls, channel: dict[str, Any]) -> "ChannelTotals":
        """One channel of nsqd's ``/stats?format=json``; memory depth is what is not on disk."""
        depth = int(channel.get("depth") or 0)
        backend = int(channel.get("backend_depth") or 0)
        clients = channel.get("client_count")
        return cls(depth=depth, memory_depth=depth - backend, backend_depth=backend,
                   in_flight=int(channel.get("in_flight_count") or 0),
                   deferred=int(channel.get("deferred_count") or 0),
                   requeued=int(channel.get("requeue_count") or 0),
                   timed_out=int(channel.get("timeout_count") or 0),
                   messages=int(channel.get("message_count") or 0),
                   clients=int(clients) if clients is not None else len(channel.get("clients") or []))


def channel_totals(stats: Iterable[dict[str, Any]], topic: str, channel: str) -> ChannelTotals | None:
    """Sum ``topic``/``channel`` over the ``/stats`` answers of several nsqds; None when
    no nsqd has that channel."""
    total: ChannelTotals | None = None
    for answer in stats:
        for t in answer.get("topics") or []:
            if t.get("topic_name") != topic:
                continue
            for c in t.get("channels") or []:
                if c.get("channel_name") == channel:
                    found = ChannelTotals.from_stats(c)
                    total = found if total is None else total + found
    return total


def header_lines() -> list[str]:
    names = _COLUMNS
    return [HEADER_GROUPS,
            f"{names[0]:>7} {names[1]:>7} | {names[2]:>7} {names[3]:>7} {names[4]:>7} {names[5]:>5} "
            f"{names[6]:>5} | {names[7]:>7} {names[8]:>7} {names[9]:>12} {names[10]:>7}"]


def row(previous: ChannelTotals, current: ChannelTotals, interval: float) -> str:
    """One report: the rates since ``previous`` (``interval`` seconds ago), then ``current``."""
    received = current.messages - previous.messages
    left = received - (current.depth - previous.depth)
    ingress, egress = int(received / interval), int(left / interval)  # truncated, as nsq_stat
    c = current
    return (f"{ingress:7d} {egress:7d} | {c.depth:7d} {c.memory_depth:7d} {c.backend_depth:7d} "
            f"{c.in_flight:5d} {c.deferred:5d} | {c.requeued:7d} {c.timed_out:7d} {c.messages:12d} "
            f"{c.clients:7d}")
