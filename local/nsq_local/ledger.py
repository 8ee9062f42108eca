"""The load's bookkeeping (no I/O): which message IDs were published and acknowledged per
topic, which each channel received and how often, and how much of each happened in each
phase of a run.

A message ID is ``<run>:<topic>:<sequence>``; the body is the ID, a space and padding.
Lost means acknowledged by an nsqd and never delivered to a channel of its topic; a
message whose publish failed and that was still delivered (the answer was lost, not the
message) is counted apart and is not a loss.
"""
from __future__ import annotations

import secrets
import time
from collections import Counter
from dataclasses import dataclass, field

def message_id(body: bytes) -> bytes:
    return body.split(b" ", 1)[0]


@dataclass
class ChannelLedger:
    delivered: set[bytes] = field(default_factory=set)
    deliveries: int = 0
    unknown: int = 0  # bodies whose ID this run never published
    deliveries_by_node: Counter[tuple[str, str]] = field(default_factory=Counter)  # (phase, nsqd)


@dataclass
class TopicLedger:
    channels: dict[str, ChannelLedger]
    sent: int = 0
    acked: set[bytes] = field(default_factory=set)
    failed: set[bytes] = field(default_factory=set)
    next_sequence: int = 0


@dataclass(frozen=True)
class ChannelTally:
    topic: str
    channel: str
    acknowledged: int
    delivered: int       # distinct IDs received
    deliveries: int      # every delivery, duplicates included
    lost: int
    duplicates: int
    failed_but_delivered: int
    unknown: int


@dataclass(frozen=True)
class PhaseTally:
    name: str
    seconds: float
    acknowledged: int
    deliveries: int

    @property
    def published_per_second(self) -> float:
        return self.acknowledged / self.seconds if self.seconds > 0 else 0.0

    @property
    def delivered_per_second(self) -> float:
        return self.deliveries / self.seconds if self.seconds > 0 else 0.0


@dataclass(frozen=True)
class Tally:
    published: int
    acknowledged: int
    failed: int
    channels: list[ChannelTally]
    phases: list[PhaseTally]
    deliveries_by_node: dict[str, Counter[str]]  # phase -> nsqd address -> deliveries

    @property
    def lost(self) -> int:
        return sum(c.lost for c in self.channels)

    @property
    def duplicates(self) -> int:
        return sum(c.duplicates for c in self.channels)

    @property
    def delivered(self) -> int:
        return sum(c.delivered for c in self.channels)

    @property
    def unknown(self) -> int:
        return sum(c.unknown for c in self.channels)


class Ledger:
    def __init__(self, topics: list[str], channels: list[str], *, run: str | None = None,
                 first_phase: str = "load", now: float | None = None) -> None:
        """``now``: when the first phase began (``time.monotonic()`` by default)."""
        self.run = run or secrets.token_hex(3)
        self.topics = {t: TopicLedger({c: ChannelLedger() for c in channels}) for t in topics}
        self.phase = first_phase
        self._phase_starts: list[tuple[str, float]] = [(self.phase, time.monotonic() if now is None else now)]
        self._acked_in: Counter[str] = Counter()
        self._delivered_in: Counter[str] = Counter()

    # -- phases ------------------------------------------------------------------------------
    def begin_phase(self, name: str, now: float | None = None) -> None:
        self.phase = name
        self._phase_starts.append((name, time.monotonic() if now is None else now))

    # -- publishing --------------------------------------------------------------------------
    def new_ids(self, topic: str, count: int) -> list[bytes]:
        book = self.topics[topic]
        first = book.next_sequence
        book.next_sequence += count
        book.sent += count
        return [f"{self.run}:{topic}:{n}".encode() for n in range(first, first + count)]

    def acknowledged(self, topic: str, ids: list[bytes]) -> None:
        self.topics[topic].acked.update(ids)
        self._acked_in[self.phase] += len(ids)

    def failed(self, topic: str, ids: list[bytes]) -> None:
        self.topics[topic].failed.update(ids)

    # -- consuming -------------------------------------------------------------------------
    def delivered(self, topic: str, channel: str, body: bytes, nsqd: str) -> None:
        book = self.topics[topic].channels[channel]
        mid = message_id(body)
        book.deliveries += 1
        book.deliveries_by_node[(self.phase, nsqd)] += 1
        self._delivered_in[self.phase] += 1
        if not mid.startswith(f"{self.run}:{topic}:".encode()):
            book.unknown += 1
            return
        book.delivered.add(mid)

    def undelivered(self) -> int:
        """Acknowledged messages some channel of their topic has not received yet."""
        return sum(len(t.acked - c.delivered) for t in self.topics.values() for c in t.channels.values())

    def deliveries_by_node(self, phase: str) -> Counter[str]:
        """How many messages each nsqd delivered (to any channel) during ``phase``."""
        counts: Counter[str] = Counter()
        for t in self.topics.values():
            for c in t.channels.values():
                for (p, node), n in c.deliveries_by_node.items():
                    if p == phase:
                        counts[node] += n
        return counts

    # -- results ------------------------------------------------------------------------------
    def tally(self, now: float | None = None) -> Tally:
        channels = []
        for topic, book in self.topics.items():
            for channel, got in book.channels.items():
                channels.append(ChannelTally(
                    topic=topic, channel=channel, acknowledged=len(book.acked),
                    delivered=len(got.delivered), deliveries=got.deliveries,
                    lost=len(book.acked - got.delivered),
                    duplicates=got.deliveries - got.unknown - len(got.delivered),
                    failed_but_delivered=len((book.failed - book.acked) & got.delivered),
                    unknown=got.unknown))
        end = time.monotonic() if now is None else now
        phases = []
        bounds = self._phase_starts + [("", end)]
        for (name, start), (_, stop) in zip(bounds, bounds[1:]):
            phases.append(PhaseTally(name, stop - start, self._acked_in[name], self._delivered_in[name]))
        return Tally(
            published=sum(t.sent for t in self.topics.values()),
            acknowledged=sum(len(t.acked) for t in self.topics.values()),
            failed=sum(len(t.failed - t.acked) for t in self.topics.values()),
            channels=channels, phases=phases,
            deliveries_by_node={p.name: self.deliveries_by_node(p.name) for p in phases})
