"""One owner's connection to one backup: frames out in order, answers in.

Every frame sent stays in a resend buffer until the backup acknowledges an APPEND after
it, and is sent again, in order, when the connection comes back: a backup that was
away for a moment misses nothing. Past ``max_buffered`` bytes the oldest are dropped and
the backup is reported behind (``missed``), never dropped from the quorum."""
from __future__ import annotations

import asyncio
import logging
from collections import deque
from typing import Callable

from nsq_protocol.host_port import split_dial_address

from . import wire
from .wire import Frame, Kind

log = logging.getLogger("nsqd")

RECONNECT_DELAY = 0.2


class PeerLink(asyncio.Protocol):
    def __init__(self, node: str, peer: str, *, ping_interval: float, max_buffered: int,
                 on_frame: Callable[[str, Frame], None], greeting: Callable[[], list[bytes]]) -> None:
        self.node = node
        self.peer = peer
        self.ping_interval = ping_interval
        self.max_buffered = max_buffered
        self._on_frame = on_frame
        self._greeting = greeting  # frames a fresh connection starts with (CHANNELS)
        # (acked-through needed to drop it, frame): an APPEND seq n goes once ACK >= n,
        # a FIN or CHANNELS sent after APPEND n once ACK >= n + 1
        self._unacked: deque[tuple[int, bytes]] = deque()
        self._buffered = 0
        self._last_seq = 0
        self.acked_through = 0
        self.missed = 0  # frames dropped from the resend buffer: this backup is behind
        self.connected = False
        self.connects = 0
        self._transport: asyncio.Transport | None = None
        self._decoder = wire.Decoder()
        self._task: asyncio.Task[None] | None = None
        self._lost: asyncio.Event = asyncio.Event()
        self._closing = False

    # -- sending ----------------------------------------------------------------
    def send_append(self, seq: int, frame: bytes) -> None:
        self._last_seq = seq
        self._keep(seq, frame)

    def send_after(self, frame: bytes) -> None:
        """A FIN or CHANNELS: ordered after the APPENDs already sent."""
        self._keep(self._last_seq + 1, frame)

    def send_once(self, frame: bytes) -> None:
        """PING, PULL: not worth resending."""
        if self._transport is not None:
            self._transport.write(frame)

    def _keep(self, drop_at: int, frame: bytes) -> None:
        self._unacked.append((drop_at, frame))
        self._buffered += len(frame)
        while self._buffered > self.max_buffered and len(self._unacked) > 1:
            _, old = self._unacked.popleft()
            self._buffered -= len(old)
            self.missed += 1
        if self._transport is not None:
            self._transport.write(frame)

    @property
    def lag(self) -> int:
        """Frames sent and not yet known to be held by the backup."""
        return len(self._unacked)

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
        self.connects += 1
        log.info("REPLICATION: connected to %s", self.peer)
        out = [wire.hello(self.node), *self._greeting(), *(frame for _, frame in self._unacked)]
        self._transport.write(b"".join(out))  # type: ignore[union-attr]

    def data_received(self, data: bytes) -> None:
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
            self._on_frame(self.peer, frame)

    def _acked(self, through: int) -> None:
        self.acked_through = max(self.acked_through, through)
        unacked = self._unacked
        while unacked and unacked[0][0] <= through:
            self._buffered -= len(unacked.popleft()[1])

    def connection_lost(self, exc: Exception | None) -> None:
        if self.connected:
            log.warning("REPLICATION: lost connection to %s: %s", self.peer, exc or "closed")
        self.connected = False
        self._transport = None
        self._lost.set()

    def ping(self) -> None:
        self.send_once(wire.ping())

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
