"""The answers a V2 connection owes, in command order, while publishes wait.

A publish to a replicated topic is answered once a quorum of replicas holds it (in
durable mode, once it is fsynced too). A connection goes on reading and publishing
behind it, up to a limit, so a client with several publishes in flight has them
replicated (and fsynced) together; its answers still leave in the order of its commands.
An answer ready early (an unreplicated topic's OK, an error) waits behind the ones owed
before it.
"""
from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass


@dataclass(slots=True)
class Waiting:
    """``oks`` OKs once ``settled`` resolves; its failure, for ``command``, otherwise."""
    command: str
    settled: "asyncio.Future[object]"
    oks: int


class CloseAfter:
    """The connection closes once everything before it is written (a fatal error's frame
    is queued just before)."""


CLOSE_AFTER = CloseAfter()
Owed = bytes | Waiting | CloseAfter


class OwedAnswers:
    __slots__ = ("limit", "_queue")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._queue: deque[Owed] = deque()

    def __bool__(self) -> bool:
        return bool(self._queue)

    def __len__(self) -> int:
        return len(self._queue)

    @property
    def full(self) -> bool:
        return len(self._queue) >= self.limit

    def add(self, owed: Owed) -> None:
        self._queue.append(owed)

    def take_settled(self) -> list[Owed]:
        """Every answer from the front that can be written now, in order: up to the first
        publish still waiting, or through a close."""
        taken: list[Owed] = []
        queue = self._queue
        while queue:
            head = queue[0]
            if isinstance(head, Waiting) and not head.settled.done():
                break
            taken.append(queue.popleft())
            if head is CLOSE_AFTER:
                queue.clear()
                break
        return taken

    def clear(self) -> None:
        self._queue.clear()
