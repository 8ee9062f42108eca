"""A raw peer of lookupd's V1 TCP protocol (what an nsqd would be), for byte-level tests."""
from __future__ import annotations

import json
import socket
import struct
import time
from typing import Any

from tests.servers import HOST, ServerProcess


class V1Peer:
    """A blocking socket speaking lookupd's V1 protocol byte by byte."""

    def __init__(self, host: str, port: int, magic: bytes = b"  V1", timeout: float = 5.0) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout)
        if magic:
            self.sock.sendall(magic)

    @classmethod
    def to(cls, lookupd: ServerProcess, magic: bytes = b"  V1") -> "V1Peer":
        """Connected to ``lookupd``'s TCP port, the magic already sent (if any)."""
        return cls(lookupd.host, lookupd.tcp_port, magic)

    def __enter__(self) -> "V1Peer":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.sock.close()

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def read_exact(self, n: int) -> bytes:
        out = b""
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            if not chunk:
                raise EOFError(f"connection closed after {len(out)} of {n} bytes")
            out += chunk
        return out

    def read_answer(self) -> bytes:
        (size,) = struct.unpack(">I", self.read_exact(4))
        return self.read_exact(size)

    def command(self, line: bytes) -> bytes:
        self.send(line)
        return self.read_answer()

    def identify(self, info: dict[str, Any]) -> bytes:
        body = json.dumps(info).encode()
        return self.command(b"IDENTIFY\n" + struct.pack(">I", len(body)) + body)

    def is_closed_by_server(self, timeout: float = 5.0) -> bool:
        """True when the server closes the connection within ``timeout``; whatever it
        sends before closing is read and dropped."""
        deadline = time.monotonic() + timeout
        try:
            while (left := deadline - time.monotonic()) > 0:
                self.sock.settimeout(left)
                if self.sock.recv(4096) == b"":
                    return True
        except (ConnectionResetError, BrokenPipeError):
            return True
        except socket.timeout:
            pass
        return False


def fake_nsqd(tcp_port: int, hostname: str = "fake-nsqd") -> dict[str, Any]:
    """IDENTIFY's body as an nsqd would send it, for an nsqd that does not exist."""
    return {"broadcast_address": HOST, "hostname": hostname, "tcp_port": tcp_port,
            "http_port": tcp_port + 1, "version": "1.3.0"}
