"""The owner's publishes waiting for their copies: each is answered once enough backups
acknowledged it, or failed at its deadline. A backup acknowledges cumulatively (it
writes one owner's frames in order), so ACK n counts for every publish up to n it was
sent."""
from __future__ import annotations

import asyncio
from typing import Callable


class ReplicationError(Exception):
    """A publish that no quorum of replicas acknowledged in time."""


class _Waiting:
    __slots__ = ("need", "deadline", "backups", "future", "acks")

    def __init__(self, need: int, deadline: float, backups: tuple[str, ...], future: "asyncio.Future[None]") -> None:
        self.need = need
        self.deadline = deadline
        self.backups = backups
        self.future = future
        self.acks = 0  # backups that acknowledged it


def _running_loop_future() -> "asyncio.Future[None]":
    return asyncio.get_running_loop().create_future()


class AckTracker:
    def __init__(self, new_future: Callable[[], "asyncio.Future[None]"] = _running_loop_future) -> None:
        self._new_future = new_future
        self._waiting: dict[int, _Waiting] = {}  # by seq, in the order sent
        # each backup's highest ACK: its ACKs only grow (seqs are never reused, a backup
        # writes one owner's frames in order), so a publish at or below it was counted
        self._through: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self._waiting)

    def add(self, seq: int, need: int, backups: tuple[str, ...], deadline: float) -> "asyncio.Future[None]":
        future = self._new_future()
        if need <= 0:
            future.set_result(None)
        else:
            self._waiting[seq] = _Waiting(need, deadline, backups, future)
        return future

    def acked(self, peer: str, through: int) -> None:
        """``peer`` holds every frame up to ``through``."""
        since = self._through.get(peer, 0)
        if through <= since:
            return
        self._through[peer] = through
        answered = []
        for seq, waiting in self._waiting.items():
            if seq > through:
                break
            if seq > since and peer in waiting.backups:
                waiting.acks += 1
                if waiting.acks >= waiting.need:
                    answered.append(seq)
        for seq in answered:
            waiting = self._waiting.pop(seq)
            if not waiting.future.done():
                waiting.future.set_result(None)

    def holding(self, seq: int, peers: tuple[str, ...]) -> int:
        """How many of ``peers`` acknowledged every frame up to ``seq`` they were sent."""
        return sum(1 for peer in peers if self._through.get(peer, 0) >= seq)

    def expire(self, now: float) -> int:
        """Fail every publish past its deadline; how many."""
        expired = [seq for seq, w in self._waiting.items() if w.deadline <= now]
        for seq in expired:
            waiting = self._waiting.pop(seq)
            if not waiting.future.done():
                waiting.future.set_exception(ReplicationError(
                    f"{waiting.acks} of {waiting.need} backup copies acknowledged in time"))
        return len(expired)

    def fail_all(self, reason: str) -> None:
        for waiting in self._waiting.values():
            if not waiting.future.done():
                waiting.future.set_exception(ReplicationError(reason))
        self._waiting.clear()
