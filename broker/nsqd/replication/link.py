"""One node's connection to one peer: frames out in order (to a backup: every frame kept
in a ``ResendBuffer`` and sent again when the connection comes back, so a backup away
for a moment misses nothing), answers in, and a PING each tick so the peer knows we
are alive (and what our wall clock says). A backup that lost what it held (or missed
frames the buffer dropped) is sent a snapshot and is *catching up* until it
acknowledges it."""
from __future__ import annotations

import asyncio
import logging
import time
from typing import Callable, Iterator, Sequence

from nsq_protocol.host_port import split_dial_address

from . import wire
from .resend import ResendBuffer
from .wire import Frame, Kind

log = logging.getLogger("nsqd")

RECONNECT_DELAY = 0.2
_SNAPSHOT_OPEN = 1 << 64  # a snapshot is being sent: no ACK counts until its SYNCED's


class PeerLink(asyncio.Protocol):
    def __init__(self, node: str, peer: str, *, max_buffered: int,
                 on_frame: Callable[[str, Frame], None], on_ack: Callable[[str, int], None],
                 greeting: Callable[[], list[bytes]], generation: Callable[[], int] = lambda: 0,
                 incarnation: str = "") -> None:
        self.node = node
        self.peer = peer
        self._on_frame = on_frame  # every frame but ACK
        self._on_ack = on_ack  # the highest ACK of a read (they are cumulative), after the link's own bookkeeping
        self._greeting = greeting  # frames a fresh connection starts with (CHANNELS)
        self._generation = generation
        self._incarnation = incarnation
        self.max_buffered = max_buffered
        self.unacked = ResendBuffer(max_buffered)
        self.connected = False
        self.welcomed = 0  # the generation the peer's last WELCOME answered (0: none on this connection)
        self.catching_up_until: int | None = None  # the snapshot's SYNCED seq, until acknowledged
        self._missed_at_sync = 0
        self._snapshot_owed = False  # sent a snapshot at the next connection, whatever it holds
        self.connects = 0
        self._transport: asyncio.Transport | None = None
        self._decoder = wire.Decoder()
        self._task: asyncio.Task[None] | None = None
        self._lost: asyncio.Event = asyncio.Event()
        self._closing = False
        self._outgoing: list[bytes] = []  # written together at the end of this loop turn
        self._writing_paused = False  # the transport's buffer is over its high-water mark
        self._writable = asyncio.Event()

    # -- sending ----------------------------------------------------------------
    def send_append(self, seq: int, frame: bytes) -> None:
        self.unacked.keep_append(seq, frame)
        self._send(frame)

    def send_after(self, frame: bytes) -> None:
        """A FIN or CHANNELS: ordered after the APPENDs already sent."""
        self.unacked.keep_after(frame)
        self._send(frame)

    def send_once(self, frame: bytes) -> None:
        """PING, PULL: not worth resending."""
        self._send(frame)

    def _send(self, frame: bytes) -> None:
        """Frames of one loop turn (many publishers' at once) leave in one write."""
        if self._transport is None:
            return
        if not self._outgoing:
            asyncio.get_running_loop().call_soon(self._flush)
        self._outgoing.append(frame)

    def _flush(self) -> None:
        frames, self._outgoing = self._outgoing, []
        if self._transport is not None and frames:
            self._transport.write(b"".join(frames) if len(frames) > 1 else frames[0])

    async def stream_snapshot(self, frames: Iterator[bytes], next_seq: Callable[[], int]) -> None:
        """Everything the backup should hold, ending with SYNCED; not kept for a resend:
        a new connection gets a new snapshot. Written as the peer reads it (a backlog of
        gigabytes is never built in memory), with live frames between its own. SYNCED's
        seq is taken last, so that no ACK counts towards a quorum before the peer holds
        the whole snapshot (ACKs are cumulative)."""
        transport = self._transport
        if transport is None:
            return
        self.catching_up_until = _SNAPSHOT_OPEN
        self._missed_at_sync = self.unacked.missed
        self._snapshot_owed = False
        for frame in frames:
            self._send(frame)
            self._flush()  # what this loop turn sent live goes first, in order
            if self._writing_paused:
                await self._writable.wait()
            if self._transport is not transport:
                return  # the connection was lost: the next one gets a snapshot of its own
        seq = next_seq()
        self.catching_up_until = seq
        self._send(wire.synced(seq))

    def drop_connection(self) -> None:
        """Close this connection (the link connects again)."""
        if self._transport is not None:
            self._transport.close()

    def pause_writing(self) -> None:
        self._writing_paused = True
        self._writable.clear()

    def resume_writing(self) -> None:
        self._writing_paused = False
        self._writable.set()

    def needs_snapshot(self, keeps_log: bool) -> bool:
        return not keeps_log or self.unacked.missed > self._missed_at_sync or self._snapshot_owed

    def resync(self) -> None:
        """The peer is to hold more than it was sent (a topic's count grew): it is sent a
        snapshot, over a new connection, and counts in no quorum until it holds it."""
        self._snapshot_owed = True
        self.drop_connection()

    @property
    def holds_snapshot(self) -> bool:
        """Whether the peer holds everything sent, no snapshot owed or streaming."""
        return not self._snapshot_owed and self.state == "in_sync"

    @property
    def state(self) -> str:
        if self.catching_up_until is not None:
            return "catching_up"
        if not self.connected or not self.welcomed or self.unacked.missed > self._missed_at_sync:
            return "behind"
        return "in_sync"

    def counts_for(self, seq: int) -> bool:
        """Whether an ACK of ``seq`` counts towards a quorum: not before the snapshot."""
        return self.catching_up_until is None or seq >= self.catching_up_until

    def new_generation(self) -> None:
        """What was sent is of a generation now adopted: forgotten, and the connection
        starts again with a HELLO of the new one."""
        self.unacked = ResendBuffer(self.max_buffered)
        self._missed_at_sync = 0
        self._outgoing = []
        if self._transport is not None:
            self._transport.close()

    @property
    def lag(self) -> int:
        """Frames sent and not yet known to be held by the backup."""
        return len(self.unacked)

    # -- connection -------------------------------------------------------------
    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        host, port = split_dial_address(self.peer)
        loop = asyncio.get_running_loop()
        while not self._closing:
            try:
                await loop.create_connection(lambda: self, host, port)
            except OSError:
                await asyncio.sleep(RECONNECT_DELAY)
                continue
            await self._lost.wait()
            self._lost.clear()
            if not self._closing:
                await asyncio.sleep(RECONNECT_DELAY)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]
        self._decoder = wire.Decoder()
        self.connected = True
        self.welcomed = 0
        self.catching_up_until = None
        self.connects += 1
        log.info("REPLICATION: connected to %s", self.peer)
        # what the backup may have missed, in the order sent, then the channels as they
        # are now (a restarted owner's backups learn them before its next FIN)
        out = [wire.hello(self.node, self._generation(), self._incarnation), *self.unacked.frames(), *self._greeting()]
        self._outgoing = []  # in the resend buffer already, or not worth resending
        self._transport.write(b"".join(out))  # type: ignore[union-attr]

    def data_received(self, data: bytes) -> None:
        if not self._decoder.buffered:  # a backup's ACKs, most reads: no Frame made for them
            seq = wire.only_acks(data)
            if seq is not None:
                self._acked(seq)
                return
        self._decoder.feed(data)
        try:
            frames = self._decoder.frames()
        except wire.WireError as e:
            log.error("REPLICATION: bad frame from %s: %s", self.peer, e)
            if self._transport is not None:
                self._transport.close()
            return
        for frame in frames:
            if frame.kind is Kind.ACK:
                self._acked(frame.seq)
                continue
            if frame.kind is Kind.WELCOME:
                self.welcomed = self._generation()
            self._on_frame(self.peer, frame)

    def _acked(self, seq: int) -> None:
        self.unacked.acked(seq)
        if self.catching_up_until is not None and seq >= self.catching_up_until:
            self.catching_up_until = None
            log.info("REPLICATION: %s caught up", self.peer)
        self._on_ack(self.peer, seq)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.connected:
            log.warning("REPLICATION: lost connection to %s: %s", self.peer, exc or "closed")
        self.connected = False
        self.welcomed = 0
        self.catching_up_until = None
        self._transport = None
        self._writing_paused = False
        self._writable.set()  # a snapshot streaming to it ends
        self._lost.set()

    def ping(self, adopt: Sequence[wire.AdoptRequest] = (), epoch: int = 0, settled: int = 0) -> None:
        self.send_once(wire.ping(int(time.time() * 1000), adopt, epoch, settled))

    async def close(self) -> None:
        self._closing = True
        if self._transport is not None:
            self._transport.close()
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
