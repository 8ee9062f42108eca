"""The in-flight and deferred priority queues of a channel.

In flight: a message's deadline is "now + its client's msg_timeout", so messages that
share a timeout arrive in deadline order. One FIFO (a dict, which keeps insertion order)
per distinct timeout is therefore a priority queue with O(1) push, remove by ID and
TOUCH (delete and insert again at the end), where a heap would need O(log n)
Python-level work on every FIN. The rare deadline that breaks the order (a TOUCH capped
by --max-msg-timeout) goes to a small heap instead.

Deferred: REQ delays and DPUB defers are arbitrary, so a heap; nothing is removed from it
except by popping.
"""
from __future__ import annotations

import heapq
import itertools
from typing import Collection, Iterable

from .message import Message


class InFlightQueue:
    __slots__ = ("_by_id", "_fifos", "_irregular")

    def __init__(self) -> None:
        self._by_id: dict[bytes, Message] = {}
        self._fifos: dict[float, dict[bytes, Message]] = {}
        self._irregular: list[tuple[float, bytes]] = []

    def __len__(self) -> int:
        return len(self._by_id)

    def __contains__(self, msg_id: bytes) -> bool:
        return msg_id in self._by_id

    def get(self, msg_id: bytes) -> Message | None:
        return self._by_id.get(msg_id)

    def messages(self) -> list[Message]:
        return list(self._by_id.values())

    def ids(self) -> Collection[bytes]:
        """The IDs in flight, as a live view."""
        return self._by_id.keys()

    def push(self, msg: Message, deadline: float, timeout: float) -> None:
        """Add a message whose deadline is ``now + timeout``."""
        msg.deadline = deadline
        self._by_id[msg.id] = msg
        fifo = self._fifos.get(timeout)
        if fifo is None:
            fifo = self._fifos[timeout] = {}
        fifo[msg.id] = msg
        msg.fifo = timeout

    def push_many(self, msgs: list[Message], deadline: float, timeout: float) -> None:
        """Add messages delivered together: one deadline, ``now + timeout``."""
        by_id = self._by_id
        fifo = self._fifos.get(timeout)
        if fifo is None:
            fifo = self._fifos[timeout] = {}
        for msg in msgs:
            msg.deadline = deadline
            msg.fifo = timeout
            by_id[msg.id] = fifo[msg.id] = msg

    def remove(self, msg_id: bytes) -> Message | None:
        msg = self._by_id.pop(msg_id, None)
        if msg is not None and msg.fifo is not None:
            del self._fifos[msg.fifo][msg_id]
        return msg

    def remove_owned(self, msg_ids: Iterable[bytes], owner: int) -> tuple[list[Message], list[tuple[bytes, str]]]:
        """FIN of a batch: remove the messages ``owner`` holds; the others are refused
        with the reason, in order."""
        by_id, fifos = self._by_id, self._fifos
        removed: list[Message] = []
        refused: list[tuple[bytes, str]] = []
        for msg_id in msg_ids:
            msg = by_id.get(msg_id)
            if msg is None:
                refused.append((msg_id, "ID not in flight"))
            elif msg.client_id != owner:
                refused.append((msg_id, "client does not own message"))
            else:
                del by_id[msg_id]
                if msg.fifo is not None:
                    del fifos[msg.fifo][msg_id]
                removed.append(msg)
        return removed, refused

    def retime(self, msg: Message, deadline: float, timeout: float, in_order: bool) -> None:
        """Give an in-flight message a new deadline (TOUCH). ``in_order``: the deadline is
        ``now + timeout``; otherwise it is earlier (capped) and goes to the heap."""
        if msg.fifo is not None:
            del self._fifos[msg.fifo][msg.id]
        if in_order:
            self.push(msg, deadline, timeout)
            return
        msg.deadline = deadline
        msg.fifo = None
        heapq.heappush(self._irregular, (deadline, msg.id))

    def pop_expired(self, now: float, limit: int = 1 << 30) -> list[Message]:
        expired: list[Message] = []
        by_id = self._by_id
        for fifo in self._fifos.values():
            due: list[Message] = []
            for queued in fifo.values():  # one pass: deadlines only grow along a FIFO
                if queued.deadline > now or len(expired) + len(due) >= limit:
                    break
                due.append(queued)
            for queued in due:
                del fifo[queued.id]
                del by_id[queued.id]
            expired += due
        heap = self._irregular
        while heap and heap[0][0] <= now and len(expired) < limit:
            deadline, msg_id = heapq.heappop(heap)
            msg = self._by_id.get(msg_id)
            if msg is not None and msg.fifo is None and msg.deadline == deadline:
                del self._by_id[msg_id]
                expired.append(msg)
        if len(heap) > 64 and len(heap) > 2 * len(self._by_id):
            self._irregular = [(d, i) for d, i in heap
                               if (m := self._by_id.get(i)) is not None and m.fifo is None and m.deadline == d]
            heapq.heapify(self._irregular)
        return expired

    def clear(self) -> list[Message]:
        msgs = list(self._by_id.values())
        self._by_id.clear()
        self._fifos.clear()
        self._irregular.clear()
        return msgs


class DeferredQueue:
    __slots__ = ("_heap", "_seq")

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, Message]] = []
        self._seq = itertools.count()

    def __len__(self) -> int:
        return len(self._heap)

    def push(self, msg: Message, due: float) -> None:
        msg.deadline = due
        heapq.heappush(self._heap, (due, next(self._seq), msg))

    def pop_due(self, now: float, limit: int = 1 << 30) -> list[Message]:
        heap = self._heap
        due: list[Message] = []
        while heap and heap[0][0] <= now and len(due) < limit:
            due.append(heapq.heappop(heap)[2])
        return due

    def messages(self) -> list[Message]:
        return [entry[2] for entry in self._heap]

    def clear(self) -> list[Message]:
        msgs = [entry[2] for entry in self._heap]
        self._heap.clear()
        return msgs
