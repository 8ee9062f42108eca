"""One owner's copies of one topic, as a backup keeps them: the messages, the channels
the owner's topic has, and which of those channels finished which message. A message
leaves the shard once every channel finished it. Also the rest of the channels' state
an adopter reproduces: a channel (or the topic's queue) emptied, the topic or a channel
paused, a message requeued with a delay."""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from itertools import repeat
from operator import getitem
from typing import Iterator, Sequence

from ..message import ID_SLICE
from .wire import Entry

_NONE: frozenset[bytes] = frozenset()


@dataclass
class Live:
    """A message to deliver after adoption, and the channels still owed it (all of them
    when ``channels`` is None: the topic had no channel yet)."""
    entry: Entry
    channels: list[str] | None
    due: dict[str, int] = field(default_factory=dict)  # channel -> when a REQ with a delay made it due (ms)


@dataclass
class Shard:
    _indexed: dict[bytes, Entry] = field(default_factory=dict)  # by ID, in arrival order
    # publishes kept as they came, one record each (payloads, due time), indexed by ID
    # only when something asks for ``messages``: a publish then costs no step per message
    _batches: list[tuple[Sequence[bytes], int]] = field(default_factory=list)
    _batched: int = 0  # messages in ``_batches``
    # the highest ID held or ever held: an owner's IDs increase, so a copied run whose
    # first ID is beyond it holds none of what is held (a resend is not)
    _newest: bytes = b""
    channels: list[str] = field(default_factory=list)
    finished: dict[str, set[bytes]] = field(default_factory=dict)  # channel -> IDs
    paused: dict[str, bool] = field(default_factory=dict)  # channel ("": the topic) -> paused, as last told
    due: dict[str, dict[bytes, int]] = field(default_factory=dict)  # channel -> ID -> due (ms), by REQ

    @property
    def messages(self) -> dict[bytes, Entry]:
        """Every live copy by ID, in arrival order."""
        if self._batches:
            self._index()
        return self._indexed

    def append(self, entries: list[Entry]) -> int:
        """Copies received (a resend after a reconnect repeats some: kept once); how
        many were new."""
        messages = self.messages
        new = 0
        newest = self._newest
        for entry in entries:
            msg_id = entry.payload[ID_SLICE]
            if msg_id not in messages:
                messages[msg_id] = entry
                new += 1
                if msg_id > newest:
                    newest = msg_id
        self._newest = newest
        return new

    def append_run(self, payloads: Sequence[bytes], defer_until_ms: int) -> None:
        """Copies that share one due time (an APPEND_RUN, an owner's publish: its IDs
        increasing), kept as one record like the owner's own. One that may repeat what
        is held (a resend after a reconnect, IDs from a clock set back) is indexed at
        once instead: an ID held keeps its one entry."""
        if not payloads:
            return
        if payloads[0][ID_SLICE] <= self._newest:
            self.messages.update(_by_id(list(payloads), defer_until_ms))
            self._newest = max(self._newest, max(map(getitem, payloads, repeat(ID_SLICE))))
            return
        self.append_fresh(payloads, defer_until_ms)

    def append_fresh(self, payloads: Sequence[bytes], defer_until_ms: int) -> None:
        """An owner's own publish: fresh IDs (never a repeat), one due time; kept as one
        record. ``payloads`` must not change afterwards (a ``PayloadRun``'s window is
        never moved by its publisher: queues take views of it)."""
        if not payloads:
            return
        self._batches.append((payloads, defer_until_ms))
        self._batched += len(payloads)
        last = payloads[-1][ID_SLICE]
        if last > self._newest:
            self._newest = last

    def _index(self) -> None:
        """The batches' messages into the index, in C loops (no Python step per message).
        Each copied run's blob is let go once its messages are indexed, so a large
        backlog is not held twice while it is indexed."""
        indexed = self._indexed
        batches = self._batches
        batches.reverse()
        while batches:
            payloads, defer_until_ms = batches.pop()
            indexed.update(_by_id(list(payloads), defer_until_ms))
            del payloads
        self._batched = 0

    def finish(self, channel: str, ids: list[bytes]) -> None:
        """``channel`` is done with ``ids`` (those this shard holds: a copy it missed has
        nothing to forget); those every channel is done with go. In set operations, not
        a Python step per message."""
        done = self.finished.setdefault(channel, set())
        held = self.messages.keys() & ids
        if not held:
            return
        done |= held
        if not self.channels:
            return
        for name in self.channels:
            held &= self.finished.get(name, _NONE)
            if not held:
                return
        self._forget_all(held)

    def empty(self, channel: str, ids: list[bytes]) -> None:
        """``channel`` emptied of ``ids``: done with them, as by a FIN. ``channel`` "":
        those copies go, for every channel (the topic's queue emptied, its last channel
        or the topic deleted)."""
        if channel:
            self.finish(channel, ids)
            return
        self._forget_all(self.messages.keys() & ids)

    def set_paused(self, channel: str, paused: bool) -> None:
        self.paused[channel] = paused

    def requeue(self, channel: str, due_ms: int, ids: list[bytes]) -> None:
        due = self.due.setdefault(channel, {})
        messages = self.messages
        for msg_id in ids:
            if msg_id in messages:
                due[msg_id] = due_ms

    def set_channels(self, names: list[str]) -> None:
        self.channels = list(names)
        for gone in set(self.finished) - set(names):
            del self.finished[gone]
        for gone in set(self.due) - set(names):
            del self.due[gone]
        for gone in set(self.paused) - set(names) - {""}:
            del self.paused[gone]
        # a message goes once every channel finished it: none can while one finished nothing
        if names and all(self.finished.get(c) for c in names):
            done = set.intersection(*(self.finished[c] for c in names))
            self._forget_all(done & self.messages.keys())

    def _forget_all(self, ids: set[bytes]) -> None:
        """``ids``, all held and indexed, go with what is kept about them."""
        if not ids:
            return
        deque(map(self._indexed.__delitem__, ids), maxlen=0)
        for done in self.finished.values():
            done -= ids
        for due in self.due.values():
            if due:
                deque(map(due.pop, ids, repeat(None)), maxlen=0)

    def live(self) -> list[Live]:
        out = []
        for msg_id, entry in self.messages.items():
            if not self.channels:
                out.append(Live(entry, None))
                continue
            owed = [c for c in self.channels if msg_id not in self.finished.get(c, ())]
            due = {c: self.due[c][msg_id] for c in owed if msg_id in self.due.get(c, ())}
            out.append(Live(entry, owed, due))
        return out

    def __len__(self) -> int:
        return len(self._indexed) + self._batched


def _by_id(payloads: list[bytes], defer_until_ms: int) -> Iterator[tuple[bytes, Entry]]:
    """(ID, Entry) for each payload, made in C loops (no Python step per message)."""
    return zip(map(getitem, payloads, repeat(ID_SLICE)),
               map(tuple.__new__, repeat(Entry), zip(payloads, repeat(defer_until_ms))))
