"""One owner's copies of one topic, as a backup keeps them: the messages, the channels
the owner's topic has, and which of those channels finished which message. A message
leaves the shard once every channel finished it. Also the rest of the channels' state
an adopter reproduces: a channel (or the topic's queue) emptied, the topic or a channel
paused, a message requeued with a delay."""
from __future__ import annotations

import struct
from array import array
from collections import Counter, deque
from dataclasses import dataclass, field
from itertools import chain, count, repeat
from operator import getitem
from typing import Iterable, Iterator, Sequence

from ..message import ID_SLICE, MESSAGE_OVERHEAD
from ..payload_run import PayloadRun
from .wire import Entry

_NONE: frozenset[bytes] = frozenset()
# a pass over the live IDs looking for publishes mostly gone, once at least this many
# (and at least as many as are live) were forgotten since the last: a few messages left
# of a publish (deferred for long, say) must not keep its whole run in memory
COMPACT_AFTER = 1024


class _Publish:
    """One publish as it came (its payloads and due time): every live ID of it refers to
    this one record, and its payloads go when the last of them does."""
    __slots__ = ("payloads", "defer_until_ms")

    def __init__(self, payloads: Sequence[bytes], defer_until_ms: int) -> None:
        self.payloads = payloads
        self.defer_until_ms = defer_until_ms

    def positions(self) -> dict[bytes, int]:
        return dict(zip(ids_of(self.payloads), count()))


@dataclass
class Live:
    """A message to deliver after adoption, and the channels still owed it (all of them
    when ``channels`` is None: the topic had no channel yet)."""
    entry: Entry
    channels: list[str] | None
    due: dict[str, int] = field(default_factory=dict)  # channel -> when a REQ with a delay made it due (ms)


@dataclass
class Shard:
    # every live ID, in arrival order, to the publish that holds its payload: indexing a
    # publish costs an ID and a dict slot per message, no copy of its payloads
    _ids: dict[bytes, _Publish] = field(default_factory=dict)
    # publishes not indexed yet: a publish costs no step per message until something
    # (a FIN, an EMPTY, a REQ, a snapshot) needs its IDs
    _unindexed: list[_Publish] = field(default_factory=list)
    _unindexed_count: int = 0
    # the highest ID held or ever held: an owner's IDs increase, so a copied run whose
    # first ID is beyond it holds none of what is held (a resend is not)
    _newest: bytes = b""
    _forgotten: int = 0  # since the last compaction
    channels: list[str] = field(default_factory=list)
    finished: dict[str, set[bytes]] = field(default_factory=dict)  # channel -> IDs
    paused: dict[str, bool] = field(default_factory=dict)  # channel ("": the topic) -> paused, as last told
    due: dict[str, dict[bytes, int]] = field(default_factory=dict)  # channel -> ID -> due (ms), by REQ

    @property
    def messages(self) -> dict[bytes, Entry]:
        """Every live copy by ID, in arrival order (made on each call: read it once)."""
        ids = self.ids()
        return dict(zip(ids, chain.from_iterable(self.entries_in_batches(ids, len(ids) or 1))))

    def ids(self) -> list[bytes]:
        """Every live ID, in arrival order."""
        self._index()
        return list(self._ids)

    def entries_in_batches(self, ids: list[bytes], size: int) -> Iterator[list[Entry]]:
        """The copies of those of ``ids`` still held, in their order, ``size`` at a time,
        each batch made as it is taken (a stream does not hold them all at once)."""
        held = self._ids
        for start in range(0, len(ids), size):
            batch: list[Entry] = []
            publish: _Publish | None = None
            where: dict[bytes, int] = {}
            payloads: list[bytes] = []
            for msg_id in ids[start:start + size]:
                owner = held.get(msg_id)
                if owner is None:
                    continue  # gone since ``ids`` was taken
                if owner is not publish:  # the payloads cut out once per publish, in a C loop
                    publish, where, payloads = owner, owner.positions(), list(owner.payloads)
                batch.append(Entry(payloads[where[msg_id]], owner.defer_until_ms))
            if batch:
                yield batch

    def append(self, entries: list[Entry]) -> int:
        """Copies received (a resend after a reconnect repeats some: kept once); how
        many were new."""
        self._index()
        held = self._ids
        new = 0
        newest = self._newest
        for entry in entries:
            msg_id = entry.payload[ID_SLICE]
            if msg_id not in held:
                held[msg_id] = _Publish((entry.payload,), entry.defer_until_ms)
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
            self._index()
            publish = _Publish(payloads, defer_until_ms)
            ids = list(ids_of(payloads))
            deque(map(self._ids.setdefault, ids, repeat(publish)), maxlen=0)
            self._newest = max(self._newest, max(ids))
            return
        self.append_fresh(payloads, defer_until_ms)

    def append_fresh(self, payloads: Sequence[bytes], defer_until_ms: int) -> None:
        """An owner's own publish: fresh IDs (never a repeat), one due time; kept as one
        record. ``payloads`` must not change afterwards (a ``PayloadRun``'s window is
        never moved by its publisher: queues take views of it)."""
        if not payloads:
            return
        self._unindexed.append(_Publish(payloads, defer_until_ms))
        self._unindexed_count += len(payloads)
        last = payloads[-1][ID_SLICE]
        if last > self._newest:
            self._newest = last

    def _index(self) -> None:
        """The publishes not indexed yet into the index, in C loops (no Python step per
        message)."""
        if not self._unindexed:
            return
        held = self._ids
        for publish in self._unindexed:
            held.update(zip(ids_of(publish.payloads), repeat(publish)))
        self._unindexed.clear()
        self._unindexed_count = 0

    def finish(self, channel: str, ids: list[bytes]) -> None:
        """``channel`` is done with ``ids`` (those this shard holds: a copy it missed has
        nothing to forget); those every channel is done with go. In set operations, not
        a Python step per message."""
        self._index()
        held = self._ids.keys() & ids
        if not held:
            self.finished.setdefault(channel, set())
            return
        channels = self.channels
        if len(channels) == 1 and channels[0] == channel:
            self._forget_all(held)  # the only channel: done with them all
            return
        done = self.finished.setdefault(channel, set())
        done |= held
        if not channels:
            return
        for name in channels:
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
        self._index()
        self._forget_all(self._ids.keys() & ids)

    def set_paused(self, channel: str, paused: bool) -> None:
        self.paused[channel] = paused

    def requeue(self, channel: str, due_ms: int, ids: list[bytes]) -> None:
        self._index()
        due = self.due.setdefault(channel, {})
        due.update(zip(self._ids.keys() & ids, repeat(due_ms)))

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
            self._index()
            self._forget_all(done & self._ids.keys())

    def _forget_all(self, ids: set[bytes]) -> None:
        """``ids``, all held and indexed, go with what is kept about them."""
        if not ids:
            return
        deque(map(self._ids.__delitem__, ids), maxlen=0)
        for done in self.finished.values():
            if done:
                done -= ids
        for due in self.due.values():
            if due:
                deque(map(due.pop, ids, repeat(None)), maxlen=0)
        self._forgotten += len(ids)
        if self._forgotten >= COMPACT_AFTER and self._forgotten >= len(self._ids):
            self._compact()

    def _compact(self) -> None:
        """Each publish of which under a quarter is live gives its live messages payloads
        of their own, so its run can go. Run once at least as many were forgotten as are
        live, it costs O(1) per message forgotten, and what runs keep beyond their live
        messages is at most what was forgotten since the last one."""
        self._forgotten = 0
        for publish, live in Counter(self._ids.values()).items():
            if len(publish.payloads) > 1 and live * 4 < len(publish.payloads):
                self._own_payloads(publish)

    def _own_payloads(self, publish: _Publish) -> None:
        """``publish``'s live messages each get a payload of their own (their run goes
        with its last reference)."""
        held = self._ids
        payloads = publish.payloads
        for msg_id, at in publish.positions().items():
            if held.get(msg_id) is publish:
                held[msg_id] = _Publish((payloads[at],), publish.defer_until_ms)

    def live(self) -> list[Live]:
        """Every live message with what is owed of it. Read whole (an adoption), so each
        publish's run is cut first, one at a time: the copies are then held once, not
        as runs and as the payloads cut from them."""
        self._index()
        publishes = [p for p in dict.fromkeys(self._ids.values()) if len(p.payloads) > 1]
        while publishes:
            self._own_payloads(publishes.pop())  # popped: its run goes once cut
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
        return len(self._ids) + self._unindexed_count


_ID_AT = ID_SLICE.start
_SAME_SIZE: dict[int, struct.Struct] = {}  # stride -> the layout of one payload, its ID alone read


def ids_of(payloads: Sequence[bytes]) -> Iterable[bytes]:
    """The IDs of ``payloads``, in order, made in C loops; a run of payloads of one size
    (an MPUB's usual shape) read by one ``struct`` pass over its bytes, without cutting
    a payload out."""
    if payloads.__class__ is PayloadRun:
        run: PayloadRun = payloads  # type: ignore[assignment]
        offsets, start, stop = run.offsets, run.start, run.stop
        first, end = offsets[start], offsets[stop]
        stride = offsets[start + 1] - first if stop > start else 0
        if stride >= MESSAGE_OVERHEAD and end - first == stride * (stop - start) and \
                offsets[start:stop + 1] == array(offsets.typecode, range(first, end + 1, stride)):
            layout = _SAME_SIZE.get(stride)
            if layout is None:
                if len(_SAME_SIZE) >= 64:
                    _SAME_SIZE.clear()
                layout = _SAME_SIZE[stride] = struct.Struct(f"{_ID_AT}x16s{stride - _ID_AT - 16}x")
            return chain.from_iterable(layout.iter_unpack(memoryview(run.blob)[first:end]))
    return map(getitem, payloads, repeat(ID_SLICE))
