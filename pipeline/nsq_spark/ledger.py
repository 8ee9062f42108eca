"""The messages a reader holds: numbered 1, 2, ... in arrival order, kept until they are
released (FINed after Spark's commit, or handed back to nsqd).

They are kept as nsqd framed them (timestamp, attempts, ID, body in one ``bytes``), next
to the connection that delivered each: a run of deliveries is added in one call, a
micro-batch becomes Arrow columns in a few vectorised steps (:mod:`schema`) and its FINs
one write per connection, with no per-message objects in between.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Generic, Iterator, TypeVar

from nsq_protocol.message import MESSAGE_HEADER, MESSAGE_HEADER_SIZE

C = TypeVar("C")  # whatever answers for a message: the connection that delivered it

ID_START, ID_END = MESSAGE_HEADER.size, MESSAGE_HEADER_SIZE  # where a message's ID sits in its frame


@dataclass
class Held(Generic[C]):
    """Messages: row ``i`` is ``frames[i]``, delivered by ``conns[i]``."""

    frames: list[bytes] = field(default_factory=list)
    conns: list[C] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.frames)

    @property
    def ids(self) -> list[bytes]:
        return [frame[ID_START:ID_END] for frame in self.frames]

    def slice(self, begin: int, end: int) -> "Held[C]":
        return Held(self.frames[begin:end], self.conns[begin:end])

    def by_conn(self) -> dict[C, list[bytes]]:
        """The IDs of each connection's messages, in order."""
        if not self.conns:
            return {}
        first = self.conns[0]
        if self.conns.count(first) == len(self.conns):  # one connection: no grouping to do
            return {first: self.ids}
        groups: dict[C, list[bytes]] = defaultdict(list)
        for conn, frame in zip(self.conns, self.frames):
            groups[conn].append(frame[ID_START:ID_END])
        return dict(groups)

    def _take(self, begin: int, end: int) -> "Held[C]":
        """Remove and return rows ``begin:end``."""
        taken = self.slice(begin, end)
        del self.frames[begin:end]
        del self.conns[begin:end]
        return taken


class Ledger(Generic[C]):
    def __init__(self) -> None:
        self._held: Held[C] = Held()
        self.received = 0   # sequence number of the latest message
        self.released = 0   # every message numbered up to this one was released

    def __len__(self) -> int:
        return len(self._held)

    def __iter__(self) -> Iterator[bytes]:
        """The IDs held, in order."""
        return iter(self._held.ids)

    def held(self) -> Held[C]:
        """A copy of what is held."""
        return self._held.slice(0, len(self._held))

    def add(self, frames: list[bytes], conn: C) -> int:
        """Hold message frames ``conn`` delivered, in order; the number of the last one."""
        self._held.frames += frames
        self._held.conns += [conn] * len(frames)
        self.received += len(frames)
        return self.received

    def between(self, after: int, through: int) -> Held[C]:
        """The messages numbered ``after + 1 .. through``."""
        if after < self.released or through > self.received or after > through:
            raise LookupError(f"messages ({after}, {through}] are not held "
                              f"(held: ({self.released}, {self.received}])")
        first = after - self.released
        return self._held.slice(first, first + through - after)

    def release_through(self, seq: int) -> Held[C]:
        """Take out every message numbered up to ``seq`` (those already released are skipped)."""
        count = max(0, min(seq, self.received) - self.released)
        self.released += count
        return self._held._take(0, count)

    def drop_after(self, seq: int) -> Held[C]:
        """Take out the messages numbered above ``seq``; their numbers are given again to
        the next ones received."""
        keep = max(seq, self.released)
        count = max(0, self.received - keep)
        self.received -= count
        return self._held._take(len(self._held) - count, len(self._held))
