"""Asyncio publishers and consumers speaking protocol V2, for durability tests and bench/.

Bodies are the identities: every test message body is unique, so "delivered" means "this
body arrived on this channel". A publisher records which bodies nsqd acknowledged (OK);
a consumer records every delivery and decides per message to FIN, hold it in flight, or
REQ it.
"""
from __future__ import annotations

import asyncio
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Iterable, Union

from nsq_protocol import HEARTBEAT, MAGIC_V2, OK, Frame, FrameDecoder, decode_message
from nsq_protocol import commands as cmd

Address = str  # "host:port"


class Disconnected(Exception):
    """nsqd closed the connection (or refused it)."""


class Refused(Exception):
    """nsqd answered a command with an error frame."""


class V2Connection:
    """One raw V2 connection: send commands, read frames; heartbeats are answered."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer
        self._frames = FrameDecoder()

    @classmethod
    async def open(cls, address: Address, timeout: float = 5.0) -> "V2Connection":
        host, _, port = address.rpartition(":")
        try:
            async with asyncio.timeout(timeout):
                reader, writer = await asyncio.open_connection(host, int(port))
        except (OSError, asyncio.TimeoutError) as e:
            raise Disconnected(f"cannot connect to {address}: {e}") from None
        conn = cls(reader, writer)
        conn.send(MAGIC_V2)
        return conn

    def send(self, data: bytes) -> None:
        self._writer.write(data)

    async def frame(self, timeout: float | None = None) -> Frame:
        """The next frame that is not a heartbeat."""
        while True:
            frame = self._frames.next_frame()
            if frame is not None:
                if frame.is_response and frame.data == HEARTBEAT:
                    self.send(cmd.nop())
                    continue
                return frame
            try:
                async with asyncio.timeout(timeout):
                    chunk = await self._reader.read(1 << 16)
            except (OSError, asyncio.IncompleteReadError) as e:
                raise Disconnected(str(e)) from None
            if not chunk:
                raise Disconnected("connection closed by nsqd")
            self._frames.feed(chunk)

    async def expect_ok(self, timeout: float | None = 30.0) -> None:
        frame = await self.frame(timeout)
        if frame.is_error:
            raise Refused(frame.data.decode(errors="replace"))
        if not (frame.is_response and frame.data == OK):
            raise AssertionError(f"expected OK, got {frame}")

    async def close(self) -> None:
        self._writer.close()
        try:
            await self._writer.wait_closed()
        except OSError:
            pass


# -- publishing ----------------------------------------------------------------

@dataclass
class Published:
    """What one publisher got acknowledged, and what was in the air when it lost nsqd."""
    acked: list[bytes] = field(default_factory=list)
    unacked: list[bytes] = field(default_factory=list)
    batches: int = 0


async def publish(address: Address, topic: str, bodies: Iterable[bytes], *, batch: int = 200,
                  result: Published | None = None) -> Published:
    """MPUB (PUB for a batch of one) the bodies in order, each batch waiting for its OK.
    Stops quietly at the first disconnect, leaving the batch in the air in ``unacked``."""
    out = result if result is not None else Published()
    conn = await V2Connection.open(address)
    try:
        chunk: list[bytes] = []
        for body in bodies:
            chunk.append(body)
            if len(chunk) >= batch:
                if not await _send_batch(conn, topic, chunk, out):
                    return out
                chunk = []
        if chunk:
            await _send_batch(conn, topic, chunk, out)
    finally:
        await conn.close()
    return out


async def _send_batch(conn: V2Connection, topic: str, chunk: list[bytes], out: Published) -> bool:
    conn.send(cmd.pub(topic, chunk[0]) if len(chunk) == 1 else cmd.mpub(topic, chunk))
    try:
        await conn.expect_ok()
    except (Disconnected, Refused):
        out.unacked.extend(chunk)
        return False
    out.acked.extend(chunk)
    out.batches += 1
    return True


async def dpub(address: Address, topic: str, delay_ms: int, bodies: Iterable[bytes]) -> list[bytes]:
    """DPUB each body with the same delay; the ones acknowledged."""
    acked: list[bytes] = []
    conn = await V2Connection.open(address)
    try:
        for body in bodies:
            conn.send(cmd.dpub(topic, delay_ms, body))
            await conn.expect_ok()
            acked.append(body)
    finally:
        await conn.close()
    return acked


# -- consuming -----------------------------------------------------------------

@dataclass(frozen=True)
class Delivery:
    body: bytes
    msg_id: bytes
    attempts: int
    at: float  # time.time() on arrival


Hold = "hold"  # leave the message in flight
Fin = "fin"
Decision = Union[str, tuple[str, int]]  # Fin, Hold, or ("req", delay_ms)
Decide = Callable[[Delivery], Decision]


def fin_all(delivery: Delivery) -> Decision:
    return Fin


class Consumer:
    """SUB to topic/channel with ``rdy`` and record deliveries until nsqd goes away or
    ``stop()``. ``decide`` says what to do with each message."""

    def __init__(self, address: Address, topic: str, channel: str, *, rdy: int = 200,
                 decide: Decide = fin_all, msg_timeout_ms: int | None = None) -> None:
        self.address, self.topic, self.channel = address, topic, channel
        self.rdy = rdy
        self.decide = decide
        self.msg_timeout_ms = msg_timeout_ms
        self.deliveries: list[Delivery] = []
        self.held: dict[bytes, Delivery] = {}
        self.finished: Counter[bytes] = Counter()  # body -> FINs sent
        self.errors: list[bytes] = []
        self._conn: V2Connection | None = None
        self._task: asyncio.Task[None] | None = None
        self._changed = asyncio.Event()

    async def start(self) -> "Consumer":
        conn = await V2Connection.open(self.address)
        if self.msg_timeout_ms is not None:
            conn.send(cmd.identify({"msg_timeout": self.msg_timeout_ms}))
            await conn.expect_ok()
        conn.send(cmd.sub(self.topic, self.channel))
        await conn.expect_ok()
        conn.send(cmd.rdy(self.rdy))
        self._conn = conn
        self._task = asyncio.get_running_loop().create_task(self._run(conn))
        return self

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    def bodies(self) -> set[bytes]:
        return {d.body for d in self.deliveries}

    async def _run(self, conn: V2Connection) -> None:
        try:
            while True:
                frame = await conn.frame()
                if frame.is_message:
                    self._handle(conn, frame)
                elif frame.is_error:
                    self.errors.append(frame.data)
                self._changed.set()
        except Disconnected:
            pass
        finally:
            self._changed.set()

    def _handle(self, conn: V2Connection, frame: Frame) -> None:
        wire = decode_message(frame.data)
        delivery = Delivery(wire.body, wire.id, wire.attempts, time.time())
        self.deliveries.append(delivery)
        decision = self.decide(delivery)
        if decision == Fin:
            conn.send(cmd.fin(wire.id))
            self.finished[wire.body] += 1
        elif decision == Hold:
            self.held[wire.id] = delivery
        else:
            _, delay_ms = decision
            conn.send(cmd.req(wire.id, int(delay_ms)))

    async def quiesce(self, timeout: float = 10.0) -> None:
        """RDY 0, then make sure nsqd has processed every FIN/REQ sent so far.

        A FIN of an ID nobody holds is answered with E_FIN_FAILED, and nsqd answers a
        connection's commands in order: the first answer means RDY 0 is in force (no more
        messages), the second that every decision about earlier messages has been taken."""
        assert self._conn is not None
        self._conn.send(cmd.rdy(0))
        for _ in range(2):
            errors = len(self.errors)
            self._conn.send(cmd.fin(b"0" * 16))
            await self.wait_until(lambda: len(self.errors) > errors, timeout, "FIN round trip")

    def fin_held(self) -> None:
        assert self._conn is not None
        for msg_id, delivery in self.held.items():
            self._conn.send(cmd.fin(msg_id))
            self.finished[delivery.body] += 1
        self.held.clear()

    async def wait_until(self, predicate: Callable[[], bool], timeout: float, what: str = "condition") -> None:
        deadline = time.monotonic() + timeout
        while not predicate():
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"{self.topic}/{self.channel}: {what} not met within {timeout}s "
                                     f"({len(self.deliveries)} deliveries)")
            self._changed.clear()
            try:
                async with asyncio.timeout(left):
                    await self._changed.wait()
            except asyncio.TimeoutError:
                pass

    async def stop(self) -> None:
        if self._conn is not None:
            await self._conn.close()
        if self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)


async def finish_then_hold(address: Address, topic: str, channel: str, finish: int, hold: int) -> Consumer:
    """A consumer that finishes the first ``finish`` messages it gets and keeps the next
    ``hold`` in flight, returned once it got them all and nsqd took its every FIN."""
    decisions = iter([Fin] * finish + [Hold] * hold)
    consumer = await Consumer(address, topic, channel, rdy=hold, decide=lambda d: next(decisions, Hold)).start()
    await consumer.wait_until(lambda: len(consumer.deliveries) >= finish + hold, 30, f"{finish + hold} deliveries")
    await consumer.quiesce()
    return consumer
