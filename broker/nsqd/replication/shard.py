"""One owner's copies of one topic, as a backup keeps them: the messages, the channels
the owner's topic has, and which of those channels finished which message. A message
leaves the shard once every channel finished it. Also the rest of the channels' state
an adopter reproduces: a channel (or the topic's queue) emptied, the topic or a channel
paused, a message requeued with a delay."""
from __future__ import annotations

from dataclasses import dataclass, field
from itertools import repeat
from operator import getitem
from typing import Iterator, Sequence

from ..message import ID_SLICE
from .wire import Entry


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
    # an owner's own fresh publishes, one record each (payloads, due time), indexed by ID
    # only when something asks for ``messages``: a publish then costs no step per message
    _batches: list[tuple[Sequence[bytes], int]] = field(default_factory=list)
    _batched: int = 0  # messages in ``_batches``
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
        for entry in entries:
            msg_id = entry.payload[ID_SLICE]
            if msg_id not in messages:
                messages[msg_id] = entry
                new += 1
        return new

    def append_run(self, payloads: list[bytes], defer_until_ms: int) -> None:
        """Copies that share one due time (an APPEND_RUN), indexed in C loops; a resend
        after a reconnect repeats some: an ID already held keeps its one entry."""
        self.messages.update(_by_id(payloads, defer_until_ms))

    def append_fresh(self, payloads: Sequence[bytes], defer_until_ms: int) -> None:
        """An owner's own publish: fresh IDs (never a repeat), one due time; kept as one
        record. ``payloads`` must not change afterwards (a ``PayloadRun``'s window is
        never moved by its publisher: queues take views of it)."""
        self._batches.append((payloads, defer_until_ms))
        self._batched += len(payloads)

    def _index(self) -> None:
        """The batches' messages into the index, in C loops (no Python step per message)."""
        indexed = self._indexed
        for payloads, defer_until_ms in self._batches:
            indexed.update(_by_id(list(payloads), defer_until_ms))
        self._batches.clear()
        self._batched = 0

    def finish(self, channel: str, ids: list[bytes]) -> None:
        done = self.finished.setdefault(channel, set())
        messages = self.messages
        for msg_id in ids:
            if msg_id in messages:  # a copy this backup missed: nothing to forget
                done.add(msg_id)
                self._forget_if_done(msg_id)

    def empty(self, channel: str, ids: list[bytes]) -> None:
        """``channel`` emptied of ``ids``: done with them, as by a FIN. ``channel`` "":
        those copies go, for every channel (the topic's queue emptied, its last channel
        or the topic deleted)."""
        if channel:
            self.finish(channel, ids)
            return
        messages = self.messages
        for msg_id in ids:
            if msg_id in messages:
                self._forget(msg_id)

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
            for msg_id in list(self.messages):
                self._forget_if_done(msg_id)

    def _forget_if_done(self, msg_id: bytes) -> None:
        if not self.channels:
            return
        finished = self.finished
        if all(msg_id in finished.get(c, ()) for c in self.channels):
            self._forget(msg_id)

    def _forget(self, msg_id: bytes) -> None:
        del self._indexed[msg_id]  # called with the batches indexed
        for done in self.finished.values():
            done.discard(msg_id)
        for due in self.due.values():
            due.pop(msg_id, None)

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
