"""The other side of the wire, written by hand: plain sockets and our sans-IO codecs.

Publishing and consuming here involve no client library at all, so what a third-party
client sends or receives is checked against bytes we produce and parse ourselves.
"""
from __future__ import annotations

import socket
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Sequence

from nsq_protocol import commands
from nsq_protocol.frames import Frame, FrameDecoder
from nsq_protocol.message import decode_message

from tests.interop.clients.bodies import read_body

MAGIC_V2 = b"  V2"
HEARTBEAT = b"_heartbeat_"
OK = b"OK"


class RawConnection:
    """One protocol V2 connection; heartbeats are answered with NOP and never returned."""

    def __init__(self, address: str, timeout: float = 10.0) -> None:
        host, port = address.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.decoder = FrameDecoder()
        self.sock.sendall(MAGIC_V2)

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def read_frame(self, deadline: float) -> Frame:
        while True:
            frame = self.decoder.next_frame()
            if frame is not None:
                if frame.is_response and frame.data == HEARTBEAT:
                    self.send(commands.nop())
                    continue
                return frame
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError("no frame from nsqd before the deadline")
            self.sock.settimeout(remaining)
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("nsqd closed the connection")
            self.decoder.feed(chunk)

    def expect_ok(self, deadline: float) -> None:
        frame = self.read_frame(deadline)
        if not (frame.is_response and frame.data == OK):
            raise AssertionError(f"expected OK, got type {frame.type}: {frame.data!r}")

    def close(self) -> None:
        self.sock.close()


def publish(address: str, topic: str, bodies: Sequence[bytes], batch: int = 100, timeout: float = 30.0) -> None:
    """PUB each body (batch == 1) or MPUB them in batches; every command must answer OK."""
    deadline = time.monotonic() + timeout
    conn = RawConnection(address)
    try:
        for start in range(0, len(bodies), batch):
            chunk = bodies[start:start + batch]
            conn.send(commands.pub(topic, chunk[0]) if batch == 1 else commands.mpub(topic, chunk))
            conn.expect_ok(deadline)
    finally:
        conn.close()


@dataclass
class Consumed:
    """What one channel delivered: how often each body ID came, and any damaged body."""
    counts: Counter[str] = field(default_factory=Counter)
    damaged: list[str] = field(default_factory=list)
    attempts: Counter[int] = field(default_factory=Counter)


def consume(address: str, topic: str, channel: str, expected: int, rdy: int = 200,
            timeout: float = 30.0) -> Consumed:
    """SUB, RDY, FIN everything until ``expected`` distinct body IDs arrived (or time runs out)."""
    deadline = time.monotonic() + timeout
    result = Consumed()
    conn = RawConnection(address)
    try:
        conn.send(commands.sub(topic, channel))
        conn.expect_ok(deadline)
        conn.send(commands.rdy(rdy))
        while len(result.counts) < expected:
            try:
                frame = conn.read_frame(deadline)
            except TimeoutError:
                break
            if not frame.is_message:
                raise AssertionError(f"unexpected frame type {frame.type}: {frame.data!r}")
            message = decode_message(frame.data)
            ident, intact = read_body(message.body)
            result.counts[ident] += 1
            result.attempts[message.attempts] += 1
            if not intact:
                result.damaged.append(ident)
            conn.send(commands.fin(message.id))
    finally:
        conn.close()
    return result
