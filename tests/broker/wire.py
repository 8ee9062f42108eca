"""A raw protocol V2 connection for tests: a blocking stdlib socket, our own encoders and
frame decoder, and the two stream compressions IDENTIFY can switch on.

It does nothing clever on its own: tests say what to send and what they expect back.
Heartbeats are answered with NOP by ``next_frame`` (unless ``auto_nop=False``), so a test
that waits a long time is not dropped for silence it did not mean.
"""
from __future__ import annotations

import json
import socket
import time
from typing import Any, Iterable

from nsq_protocol import HEARTBEAT, MAGIC_V2, OK, Frame, FrameDecoder, WireMessage, decode_message
from nsq_protocol import commands as cmd
from nsq_protocol.compression import DeflateCodec, SnappyCodec, StreamCodec

Address = tuple[str, int]


class Closed(Exception):
    """The server closed the connection."""


class Silent(Exception):
    """Nothing (or not enough) arrived before the deadline."""


def parse_address(address: str | Address) -> Address:
    if isinstance(address, tuple):
        return address
    host, _, port = address.rpartition(":")
    return host, int(port)


class WireConn:
    def __init__(self, address: str | Address, *, magic: bytes | None = MAGIC_V2,
                 timeout: float = 5.0, auto_nop: bool = True) -> None:
        self.timeout = timeout
        self.auto_nop = auto_nop
        self.sock = socket.create_connection(parse_address(address), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._frames = FrameDecoder()
        self._codec: StreamCodec | None = None
        self._eof = False
        self.heartbeats = 0
        # bytes as they crossed the socket, and the same bytes before compression
        self.wire_bytes_sent = 0
        self.wire_bytes_received = 0
        self.plain_bytes_sent = 0
        self.plain_bytes_received = 0
        if magic is not None:
            self.send_raw(magic)

    # -- sending --------------------------------------------------------------
    def send_raw(self, data: bytes) -> None:
        """Bytes straight to the socket, bypassing any negotiated compression."""
        self.sock.sendall(data)
        self.wire_bytes_sent += len(data)

    def encode(self, data: bytes) -> bytes:
        """``data`` as it goes on the wire (compressed if negotiated); for ``send_raw``."""
        return self._codec.encode(data) if self._codec is not None else data

    def send(self, data: bytes) -> None:
        self.plain_bytes_sent += len(data)
        self.send_raw(self.encode(data))

    def identify(self, data: dict[str, Any]) -> None:
        self.send(cmd.identify(data))

    def auth(self, secret: bytes | str) -> None:
        self.send(cmd.auth(secret))

    def sub(self, topic: str, channel: str) -> None:
        self.send(cmd.sub(topic, channel))

    def rdy(self, count: int) -> None:
        self.send(cmd.rdy(count))

    def fin(self, msg_id: bytes) -> None:
        self.send(cmd.fin(msg_id))

    def req(self, msg_id: bytes, delay_ms: int = 0) -> None:
        self.send(cmd.req(msg_id, delay_ms))

    def touch(self, msg_id: bytes) -> None:
        self.send(cmd.touch(msg_id))

    def cls(self) -> None:
        self.send(cmd.cls())

    def nop(self) -> None:
        self.send(cmd.nop())

    def pub(self, topic: str, body: bytes) -> None:
        self.send(cmd.pub(topic, body))

    def mpub(self, topic: str, bodies: Iterable[bytes]) -> None:
        self.send(cmd.mpub(topic, list(bodies)))

    def dpub(self, topic: str, delay_ms: int, body: bytes) -> None:
        self.send(cmd.dpub(topic, delay_ms, body))

    # -- receiving ------------------------------------------------------------
    def _fill(self, deadline: float) -> None:
        if self._eof:
            raise Closed("connection closed by the server")
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise Silent("nothing arrived in time")
        self.sock.settimeout(remaining)
        try:
            chunk = self.sock.recv(65536)
        except socket.timeout:
            raise Silent("nothing arrived in time") from None
        except (ConnectionResetError, BrokenPipeError, ConnectionAbortedError):
            chunk = b""
        if not chunk:
            self._eof = True
            raise Closed("connection closed by the server")
        self.wire_bytes_received += len(chunk)
        if self._codec is not None:
            chunk = self._codec.decode(chunk)
        self.plain_bytes_received += len(chunk)
        self._frames.feed(chunk)

    def read_frame(self, timeout: float | None = None) -> Frame:
        """The next frame, heartbeats included."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while (frame := self._frames.next_frame()) is None:
            self._fill(deadline)
        return frame

    def next_frame(self, timeout: float | None = None) -> Frame:
        """The next frame that is not a heartbeat (heartbeats get a NOP if auto_nop)."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while True:
            frame = self.read_frame(max(0.0, deadline - time.monotonic()))
            if frame.is_response and frame.data == HEARTBEAT:
                self.heartbeats += 1
                if self.auto_nop:
                    self.nop()
                continue
            return frame

    def expect_response(self, data: bytes, timeout: float | None = None) -> None:
        frame = self.next_frame(timeout)
        assert frame.is_response and frame.data == data, f"expected response {data!r}, got {frame}"

    def expect_ok(self, timeout: float | None = None) -> None:
        self.expect_response(OK, timeout)

    def expect_error(self, code: str, timeout: float | None = None) -> Frame:
        frame = self.next_frame(timeout)
        assert frame.is_error and frame.error_code == code, f"expected {code}, got {frame}"
        return frame

    def expect_fatal(self, code: str, timeout: float = 5.0) -> Frame:
        """An error frame with ``code``, then the server closes the connection."""
        frame = self.expect_error(code, timeout)
        assert self.closed_within(timeout), f"connection still open after {code}"
        return frame

    def read_json(self, timeout: float | None = None) -> Any:
        frame = self.next_frame(timeout)
        assert frame.is_response, f"expected a JSON response, got {frame}"
        return json.loads(frame.data)

    def read_message(self, timeout: float | None = None) -> WireMessage:
        frame = self.next_frame(timeout)
        assert frame.is_message, f"expected a message, got {frame}"
        return decode_message(frame.data)

    def read_messages(self, n: int, timeout: float = 10.0) -> list[WireMessage]:
        deadline = time.monotonic() + timeout
        out: list[WireMessage] = []
        while len(out) < n:
            try:
                out.append(self.read_message(max(0.0, deadline - time.monotonic())))
            except Silent:
                raise Silent(f"received {len(out)} of {n} messages") from None
        return out

    def expect_silence(self, duration: float) -> None:
        """No frame other than heartbeats arrives for ``duration`` seconds."""
        try:
            frame = self.next_frame(duration)
        except Silent:
            return
        raise AssertionError(f"expected nothing for {duration}s, got {frame}")

    def closed_within(self, timeout: float) -> bool:
        """Read (and drop) whatever comes until the server closes; False on timeout."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                self._fill(deadline)
            except Closed:
                return True
            except Silent:
                return False
            self._frames.take_unparsed()

    # -- IDENTIFY and compression ----------------------------------------------
    def negotiate(self, features: dict[str, Any]) -> dict[str, Any]:
        """IDENTIFY with feature negotiation; switch compression on if the server agreed
        (its OK then arrives compressed). Returns the server's JSON."""
        self.identify({"feature_negotiation": True, **features})
        answer = self.read_json()
        if answer.get("deflate"):
            self._switch(DeflateCodec(answer["deflate_level"]))
        elif answer.get("snappy"):
            self._switch(SnappyCodec())
        if answer.get("deflate") or answer.get("snappy"):
            self.expect_ok()
        return answer

    def _switch(self, codec: StreamCodec) -> None:
        # what arrived after the IDENTIFY answer was already compressed
        rest = self._frames.take_unparsed()
        self._codec = codec
        if rest:
            decoded = codec.decode(rest)
            self.plain_bytes_received += len(decoded) - len(rest)
            self._frames.feed(decoded)

    # -- lifecycle --------------------------------------------------------------
    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass

    def __enter__(self) -> "WireConn":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
