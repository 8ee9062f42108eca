"""The backup's side: connections from owners. HELLO is answered with WELCOME (or, for
a fenced generation, the connection closes); APPEND, FIN and CHANNELS frames go to the
store; an APPEND (and a snapshot's SYNCED) is acknowledged once the store committed it;
a PULL fences the owner's generation and is answered with every copy held of it,
streamed as the adopter reads it; a DROP forgets an adopted owner's copies."""
from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator

from . import wire
from .generations import Generations
from .store import ReplicaStore
from .wire import AdoptRequest, Frame, Kind

log = logging.getLogger("nsqd")

PULL_BATCH = 500  # messages in one APPEND of a PULL's answer


@dataclass
class BackupSide:
    """What every connection from an owner shares."""
    store: ReplicaStore
    generations: Generations
    heard: Callable[[str], None]
    known: Callable[[str], bool]
    connections: set["BackupConnection"] = field(default_factory=set)
    # owner -> how far our wall clock is ahead of its (ms), from its last PING: the due
    # times of its copies are in its clock, and an adoption reads them in ours
    clock_offsets: dict[str, int] = field(default_factory=dict)
    # a holder of a lost owner's copies (the first argument) asks us, its first live
    # backup, to adopt them
    asked_to_adopt: Callable[[str, list[AdoptRequest]], None] = lambda holder, requests: None
    # a peer's PING says its peer list's epoch and the epoch it is settled at
    membership_heard: Callable[[str, int, int], None] = lambda peer, epoch, settled: None

    def clocked(self, owner: str, clock_ms: int) -> None:
        self.clock_offsets[owner] = int(time.time() * 1000) - clock_ms

    def fence(self, owner: str, generation: int) -> None:
        """No more frames of ``owner``'s ``generation`` or older: its connections close."""
        self.generations.fence(owner, generation)
        for conn in list(self.connections):
            if conn.owner == owner and conn.generation <= generation:
                conn.close()

    def drop(self, owner: str, generation: int) -> None:
        """An adopter took ``owner``'s copies up to ``generation`` over."""
        self.fence(owner, generation)
        self.generations.announce(owner, generation)
        if self.store.generation(owner) <= generation:
            self.store.drop(owner)


class BackupConnection(asyncio.Protocol):
    def __init__(self, side: BackupSide) -> None:
        self.side = side
        self.store = side.store
        self._heard = side.heard
        self.owner: str | None = None
        self.generation = 0
        self._ack_due = 0  # the highest APPEND committed and not yet acknowledged
        self._decoder = wire.Decoder()
        self._transport: asyncio.Transport | None = None
        self._writable = asyncio.Event()  # clear while the transport is over its high-water mark
        self._writable.set()
        self._answers: set[asyncio.Task[None]] = set()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]
        self.side.connections.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self._transport = None
        self._writable.set()  # an answer streaming on it ends
        self.side.connections.discard(self)

    def pause_writing(self) -> None:
        self._writable.clear()

    def resume_writing(self) -> None:
        self._writable.set()

    def close(self) -> None:
        """After what was written (a WELCOME) is flushed; nothing more is read."""
        self.owner = None
        if self._transport is not None:
            self._transport.close()
            self._transport = None

    def data_received(self, data: bytes) -> None:
        self._decoder.feed(data)
        try:
            frames = self._decoder.frames_with_bytes()
            for frame, raw in frames:
                if self._transport is None:
                    return  # closed by a fence
                self._handle(frame, raw)
        except wire.WireError as e:
            log.error("REPLICATION: bad frame from %s: %s", self.owner or "a new connection", e)
            if self._transport is not None:
                self._transport.close()

    def _handle(self, frame: Frame, raw: bytes) -> None:
        if self.owner is None:
            if frame.kind is not Kind.HELLO or not self.side.known(frame.name):
                raise wire.WireError(f"expected HELLO from a peer, got {frame.kind.name} {frame.name!r}")
            self._hello(frame.name, max(frame.generation, 1), frame.incarnation)
            return
        self._heard(self.owner)
        kind = frame.kind
        if kind is Kind.APPEND_RUN or kind is Kind.APPEND:
            self.store.apply(self.owner, frame, raw)
            seq = frame.seq
            if seq:  # a snapshot's APPENDs have none: its SYNCED is acknowledged
                self.store.after_commit(lambda: self._committed(seq))
        elif kind in (Kind.FIN, Kind.CHANNELS, Kind.RESET, Kind.EMPTY, Kind.PAUSE, Kind.REQ):
            self.store.apply(self.owner, frame, raw)
        elif kind is Kind.SYNCED:
            self.store.apply(self.owner, frame, raw)
            seq = frame.seq
            self.store.after_commit(lambda: self._committed(seq))
        elif kind is Kind.PULL:
            self.side.fence(frame.name, frame.generation)
            self._answer_pull(frame.seq, frame.name)
        elif kind is Kind.DROP:
            self.side.drop(frame.name, frame.generation)
        elif kind is Kind.PING:
            if frame.clock_ms:
                self.side.clocked(self.owner, frame.clock_ms)
            if frame.adopt:
                self.side.asked_to_adopt(self.owner, frame.adopt)
            self.side.membership_heard(self.owner, frame.epoch, frame.settled)
        else:
            raise wire.WireError(f"unexpected {kind.name} from an owner")

    def _hello(self, owner: str, generation: int, incarnation: str) -> None:
        self._heard(owner)
        gens = self.side.generations
        held = self.store.generation(owner)
        if self.store.other_life(owner, generation, incarnation) and not gens.refuses(owner, held):
            # the owner lost its data path (and came back without a silent start long
            # enough for us to adopt, or we were down meanwhile): the live copies held
            # here are of a life of it that knows nothing of them. Fenced, they are
            # adopted (``Replicator._tick``); until that is announced it is answered
            # nothing, so its new life neither replaces them nor takes their generation.
            # (Copies of a generation fenced here already belong to an adoption that
            # began: it delivers them, and the owner is answered as it was before.)
            log.warning("REPLICATION: %s is back in generation %d of another life, and %d of its messages "
                        "of generation %d are held here: they are adopted", owner, generation,
                        self.store.held(owner), held)
            self.side.fence(owner, held)
            self.close()
            return
        if gens.refuses(owner, generation):
            announced = gens.announced_for(owner)
            if announced >= generation:  # adopted: the owner learns it and moves on
                self._write(wire.welcome(announced, False))
            self.close()  # else an adoption is under way: it learns once that is done
            return
        self.owner, self.generation = owner, generation
        self.store.begin(owner, generation, incarnation)
        self._write(wire.welcome(gens.announced_for(owner), self.store.keeps_log(owner)))

    def _committed(self, seq: int) -> None:
        """One ACK for all the APPENDs a commit made durable (ACKs are cumulative)."""
        if not self._ack_due:
            asyncio.get_running_loop().call_soon(self._send_ack)
        self._ack_due = max(self._ack_due, seq)

    def _send_ack(self) -> None:
        seq, self._ack_due = self._ack_due, 0
        self._write(wire.ack(seq))

    def _answer_pull(self, seq: int, owner: str) -> None:
        task = asyncio.get_running_loop().create_task(self._stream_pull(seq, owner))
        self._answers.add(task)
        task.add_done_callback(self._answers.discard)

    async def _stream_pull(self, seq: int, owner: str) -> None:
        """Written as the adopter reads it: a backlog of gigabytes is never built here.
        The owner's generation is fenced, so nothing it sends changes the copies meanwhile."""
        transport = self._transport
        if transport is None:
            return
        try:
            for frame in pull_answer(self.store, owner):
                if self._transport is not transport:
                    return  # the adopter asks again, or adopts without us
                transport.write(frame)
                await self._writable.wait()
            if self._transport is transport:
                transport.write(wire.done(seq))
        except Exception:
            log.exception("REPLICATION: answering a PULL of %s's copies failed", owner)
            if self._transport is transport:
                self.close()

    def _write(self, data: bytes) -> None:
        if self._transport is not None:
            self._transport.write(data)


def pull_answer(store: ReplicaStore, owner: str) -> Iterator[bytes]:
    """Every copy ``store`` holds of ``owner``'s messages, as PULLED frames, made as taken."""
    return (wire.pulled(owner, frame) for frame in shard_frames(store, owner))


def shard_frames(store: ReplicaStore, owner: str, topics: Iterable[str] | None = None) -> Iterator[bytes]:
    """What ``store`` holds of ``owner`` (of ``topics`` only, when given), as frames: per
    topic its channels, its messages, what each channel finished, what is paused and what
    was requeued with a delay (applied in that order, they rebuild the same shard).

    Made as they are taken, so a snapshot streamed while the shard changes says each
    topic's channels and state as they are when it reaches them: a change made before
    is in it, one made after follows it on the link. (A message finished while its topic
    streams may be sent as live: a duplicate after an adoption, never a loss.)"""
    for topic in list(store.shards.get(owner, {})) if topics is None else list(topics):
        shard = store.shards.get(owner, {}).get(topic)
        if shard is None:
            continue
        yield wire.channels(topic, shard.channels)
        for entries in shard.entries_in_batches(shard.ids(), PULL_BATCH):
            yield wire.append(0, topic, entries)
        for channel, ids in list(shard.finished.items()):
            if ids:
                yield wire.fin(topic, channel, sorted(ids))
        for channel, paused in list(shard.paused.items()):
            yield wire.pause(topic, channel, paused)
        for channel, dues in list(shard.due.items()):
            for due_ms, ids in wire.grouped_by_due(dues):
                yield wire.req(topic, channel, due_ms, ids)
