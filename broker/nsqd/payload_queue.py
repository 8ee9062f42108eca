"""The memory queue of a topic or a channel: messages in order, each a bare payload, a
``Message`` (state of its own) or one of a ``PayloadRun``'s payloads.

A run put in the queue stays one entry (its payloads are not copied out of it, and every
queue holding the same publish shares its data); payloads leave it as ``bytes`` of their
own when taken from the front (``popleft``, ``popleft_many``) or back (``pop``). ``len``
counts messages, whatever their form; so does the ``length`` attribute, which hot paths
read without the cost of a call.
"""
from __future__ import annotations

from collections import deque
from itertools import chain
from typing import Iterator

from .message import Message, Payload
from .payload_run import PACK_MIN, PayloadRun, Payloads

Item = Payload | Message


class PayloadQueue:
    __slots__ = ("_entries", "length", "_runs")

    def __init__(self) -> None:
        self._entries: deque[Item | PayloadRun] = deque()
        self.length = 0
        self._runs = 0  # entries that are runs: with none, the entries are the messages

    def __len__(self) -> int:
        return self.length

    def __bool__(self) -> bool:
        return self.length > 0

    def __iter__(self) -> Iterator[Item]:
        if not self._runs:
            return iter(self._entries)  # type: ignore[arg-type]
        return chain.from_iterable(
            entry if entry.__class__ is PayloadRun else (entry,) for entry in self._entries)  # type: ignore[misc]

    def append(self, item: Item) -> None:
        self._entries.append(item)
        self.length += 1

    def extend(self, payloads: Payloads) -> None:
        """Fresh payloads in order; a run (or a list long enough to be worth packing) is
        kept as one entry."""
        count = len(payloads)
        if not count:
            return
        if payloads.__class__ is PayloadRun:
            self._entries.append(payloads.view())  # type: ignore[union-attr]
            self._runs += 1
        elif count >= PACK_MIN:
            self._entries.append(PayloadRun.of(payloads))  # type: ignore[arg-type]
            self._runs += 1
        else:
            self._entries.extend(payloads)
        self.length += count

    def head_is_fresh(self) -> bool:
        """The first message is a bare payload (not a ``Message``); False when empty."""
        return bool(self._entries) and self._entries[0].__class__ is not Message

    def popleft(self) -> Item:
        entries = self._entries
        head = entries[0]  # IndexError when empty, as a deque's
        self.length -= 1
        if head.__class__ is not PayloadRun:
            return entries.popleft()  # type: ignore[return-value]
        payload = head.take(1)[0]  # type: ignore[union-attr]
        if not head:
            entries.popleft()
            self._runs -= 1
        return payload

    def popleft_fresh_one(self) -> Payload | None:
        """The first message when it is a bare payload (taken), else None (nothing taken):
        ``head_is_fresh`` and ``popleft`` in one call, for a consumer with RDY 1."""
        entries = self._entries
        if not entries:
            return None
        head = entries[0]
        cls = head.__class__
        if cls is PayloadRun:
            start = head.start  # type: ignore[union-attr]
            offsets = head.offsets  # type: ignore[union-attr]
            payload = head.blob[offsets[start]:offsets[start + 1]]  # type: ignore[union-attr]
            head.start = start + 1  # type: ignore[union-attr]
            if head.start == head.stop:  # type: ignore[union-attr]
                entries.popleft()
                self._runs -= 1
        elif cls is Message:
            return None
        else:
            payload = entries.popleft()  # type: ignore[assignment]
        self.length -= 1
        return payload  # type: ignore[return-value]

    def popleft_many(self, count: int) -> list[Item]:
        """Up to ``count`` messages from the front."""
        entries = self._entries
        taken: list[Item] = []
        while count > 0 and entries:
            head = entries[0]
            if head.__class__ is PayloadRun:
                part = head.take(count)  # type: ignore[union-attr]
                if not head:
                    entries.popleft()
                    self._runs -= 1
                taken += part
                count -= len(part)
                continue
            singles = 0  # how many separate items lead, up to count
            for entry in entries:
                if singles == count or entry.__class__ is PayloadRun:
                    break
                singles += 1
            taken += [entries.popleft() for _ in range(singles)]
            count -= singles
        self.length -= len(taken)
        return taken

    def popleft_fresh(self, limit: int) -> list[Payloads]:
        """Bare payloads from the front, up to ``limit`` messages and up to the first
        ``Message``, as batches: runs whole where they fit (shared, not copied)."""
        entries = self._entries
        batches: list[Payloads] = []
        singles: list[Payload] = []
        left = limit
        while left > 0 and entries and entries[0].__class__ is not Message:
            head = entries[0]
            if head.__class__ is not PayloadRun:
                singles.append(entries.popleft())  # type: ignore[arg-type]
                left -= 1
                continue
            if singles:
                batches.append(singles)
                singles = []
            if len(head) <= left:  # type: ignore[arg-type]
                entries.popleft()
                self._runs -= 1
                batches.append(head)  # type: ignore[arg-type]
                left -= len(head)  # type: ignore[arg-type]
            else:
                part = head[:left]  # type: ignore[index]
                head.start += left  # type: ignore[union-attr]
                batches.append(part)
                left = 0
        if singles:
            batches.append(singles)
        self.length -= limit - left
        return batches

    def pop(self) -> Item:
        """The newest message, from the back."""
        entries = self._entries
        tail = entries[-1]
        self.length -= 1
        if tail.__class__ is not PayloadRun:
            return entries.pop()  # type: ignore[return-value]
        payload = tail.take_last()  # type: ignore[union-attr]
        if not tail:
            entries.pop()
            self._runs -= 1
        return payload

    def clear(self) -> None:
        self._entries.clear()
        self.length = 0
        self._runs = 0
