"""A scripted stand-in for nsqd, and the client's socket seen from the kernel's side.

The stand-in runs in a thread with blocking sockets, so it can answer and then reset the
connection while the client's event loop is held (a test blocking synchronously): the
answers then sit unread in the client's socket when its next write fails, every time,
with no timing involved. ``tcp_state`` and ``unread_bytes`` tell the test when that point
is reached, without reading anything. With a server ``tls`` context it answers IDENTIFY
as nsqd does when TLS is on (``tls_v1``), takes the handshake and speaks TLS from then on.
"""
from __future__ import annotations

import fcntl
import json
import socket
import ssl
import struct
import termios
import threading
from types import TracebackType
from typing import Any, Callable

from nsq_client import Connection
from nsq_protocol import OK
from nsq_protocol.commands import Command, CommandDecoder
from nsq_protocol.frames import FRAME_RESPONSE, encode_frame
from nsq_protocol.message import encode_message_frame
from tests.servers import HOST, wait_for

TCP_CLOSE = 7        # linux/tcp_states.h: reset (or fully closed)
TCP_CLOSE_WAIT = 8   # the peer's FIN came, ours was not sent
OK_FRAME = encode_frame(FRAME_RESPONSE, OK)


def client_socket(conn: Connection) -> Any:
    """The connection's socket (asyncio's TransportSocket: getsockopt and fileno only)."""
    return conn._writer.get_extra_info("socket")  # type: ignore[union-attr]


def tcp_state(sock: Any) -> int:
    return sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 1)[0]


def unread_bytes(sock: Any) -> int:
    """Bytes received by the kernel that nobody has read yet."""
    return _ioctl_int(sock, termios.FIONREAD)


def _ioctl_int(sock: Any, request: int) -> int:
    return struct.unpack("i", fcntl.ioctl(sock.fileno(), request, struct.pack("i", 0)))[0]


def message_frame(number: int, body: bytes) -> bytes:
    return encode_message_frame(b"%016d" % number, 0, 1, body)


class Peer:
    """The server's end of one client connection."""

    def __init__(self, sock: socket.socket) -> None:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock = sock
        self._decoder = CommandDecoder()
        self._magic = b""

    def read_commands(self, count: int) -> list[Command]:
        commands: list[Command] = []
        while len(commands) < count:
            while (command := self._decoder.next_command()) is not None:
                commands.append(command)
                if len(commands) == count:
                    return commands
            data = self.sock.recv(65536)
            if not data:
                raise ConnectionError(f"the client closed after {len(commands)} of {count} commands")
            if len(self._magic) < 4:
                take = 4 - len(self._magic)
                self._magic, data = self._magic + data[:take], data[take:]
            self._decoder.feed(data)
        return commands

    def expect(self, *names: bytes) -> list[Command]:
        commands = self.read_commands(len(names))
        assert [c.name for c in commands] == list(names), commands
        return commands

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def reset(self) -> None:
        """Close with a reset (SO_LINGER 0), whatever the client sent that was not read,
        once the client's kernel has acknowledged every byte sent (a reset discards what
        is still queued to send)."""
        wait_for(lambda: _ioctl_int(self.sock, termios.TIOCOUTQ) == 0, message="everything sent acknowledged")
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.sock.close()


class ScriptedNsqd:
    """Accepts one client, answers IDENTIFY with OK (no feature negotiation; with ``tls``,
    the settings enabling TLS, then OK over it), then runs ``script(peer)`` in its thread
    and stops listening: a reconnect is refused. ``done`` is set once the script has
    returned; an error in it fails :meth:`wait_done`."""

    def __init__(self, script: Callable[[Peer], None], tls: ssl.SSLContext | None = None) -> None:
        self._script = script
        self._tls = tls
        self._listener = socket.create_server((HOST, 0))
        self.address = f"{HOST}:{self._listener.getsockname()[1]}"
        self.done = threading.Event()
        self.error: BaseException | None = None
        self._peer: Peer | None = None
        self._thread = threading.Thread(target=self._run, name="scripted-nsqd", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            sock, _ = self._listener.accept()
            self._listener.close()
            self._peer = peer = Peer(sock)
            peer.expect(b"IDENTIFY")
            if self._tls is not None:
                peer.send(encode_frame(FRAME_RESPONSE, json.dumps({"tls_v1": True}).encode()))
                peer.sock = self._tls.wrap_socket(peer.sock, server_side=True)
            peer.send(OK_FRAME)
            self._script(peer)
        except BaseException as err:
            self.error = err
        finally:
            self._listener.close()
            self.done.set()

    def wait_done(self, timeout: float = 10.0) -> None:
        assert self.done.wait(timeout), "the script did not finish"
        if self.error is not None:
            raise AssertionError(f"the script failed: {self.error!r}") from self.error

    def close(self) -> None:
        socks = [self._listener] + ([self._peer.sock] if self._peer is not None else [])
        for sock in socks:  # shutdown wakes the thread where close alone would not
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()
        self._thread.join(10)

    def __enter__(self) -> "ScriptedNsqd":
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
