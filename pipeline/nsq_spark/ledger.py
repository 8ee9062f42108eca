"""The messages a reader holds: numbered 1, 2, ... in arrival order, kept until they are
released (FINed after Spark's commit, or handed back to nsqd)."""
from __future__ import annotations

from collections import deque
from typing import Generic, Iterator, TypeVar

T = TypeVar("T")


class Ledger(Generic[T]):
    def __init__(self) -> None:
        self._held: deque[T] = deque()
        self.received = 0   # sequence number of the latest message
        self.released = 0   # every message numbered up to this one was released

    def __len__(self) -> int:
        return len(self._held)

    def __iter__(self) -> Iterator[T]:
        return iter(self._held)

    def add(self, item: T) -> int:
        self._held.append(item)
        self.received += 1
        return self.received

    def between(self, after: int, through: int) -> list[T]:
        """The messages numbered ``after + 1 .. through``."""
        if after < self.released or through > self.received or after > through:
            raise LookupError(f"messages ({after}, {through}] are not held "
                              f"(held: ({self.released}, {self.received}])")
        first = after - self.released
        return [self._held[i] for i in range(first, first + through - after)]

    def release_through(self, seq: int) -> list[T]:
        """Take out every message numbered up to ``seq`` (those already released are skipped)."""
        taken: list[T] = []
        while self.released < min(seq, self.received):
            taken.append(self._held.popleft())
            self.released += 1
        return taken

    def drop_after(self, seq: int) -> list[T]:
        """Take out the messages numbered above ``seq``; their numbers are given again to
        the next ones received."""
        keep = max(seq, self.released)
        taken: list[T] = []
        while self.received > keep:
            taken.append(self._held.pop())
            self.received -= 1
        taken.reverse()
        return taken
