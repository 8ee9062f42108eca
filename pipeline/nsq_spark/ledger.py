"""The messages a reader holds: numbered 1, 2, ... in arrival order, kept until they are
released (FINed after Spark's commit, or handed back to nsqd).

They are kept column by column (IDs, bodies, timestamps, attempts, the connection that
delivered each), not as one object per message: a micro-batch becomes Arrow columns and
its FINs one write per connection, with no per-message objects in between.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Generic, Iterator, TypeVar

C = TypeVar("C")  # whatever answers for a message: the connection that delivered it


@dataclass
class Held(Generic[C]):
    """Messages, column by column; row ``i`` of every list is one message."""

    ids: list[bytes] = field(default_factory=list)
    bodies: list[bytes] = field(default_factory=list)
    timestamps: list[int] = field(default_factory=list)   # nanoseconds since the epoch
    attempts: list[int] = field(default_factory=list)
    conns: list[C] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.ids)

    def slice(self, begin: int, end: int) -> "Held[C]":
        return Held(self.ids[begin:end], self.bodies[begin:end], self.timestamps[begin:end],
                    self.attempts[begin:end], self.conns[begin:end])

    def by_conn(self) -> dict[C, list[bytes]]:
        """The IDs of each connection's messages, in order."""
        groups: dict[C, list[bytes]] = defaultdict(list)
        for conn, msg_id in zip(self.conns, self.ids):
            groups[conn].append(msg_id)
        return dict(groups)

    def _take(self, begin: int, end: int) -> "Held[C]":
        """Remove and return rows ``begin:end``."""
        taken = self.slice(begin, end)
        for column in (self.ids, self.bodies, self.timestamps, self.attempts, self.conns):
            del column[begin:end]
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
        return iter(list(self._held.ids))

    def held(self) -> Held[C]:
        """A copy of what is held."""
        return self._held.slice(0, len(self._held))

    def add(self, msg_id: bytes, body: bytes, timestamp: int, attempts: int, conn: C) -> int:
        held = self._held
        held.ids.append(msg_id)
        held.bodies.append(body)
        held.timestamps.append(timestamp)
        held.attempts.append(attempts)
        held.conns.append(conn)
        self.received += 1
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
