"""Run a server (our ``nsqlookupd`` by default) as a subprocess on 127.0.0.1, and talk to it.

``ServerProcess`` starts the command with ``--tcp-address``/``--http-address`` on
127.0.0.1 (port 0 unless given, the real ports are read from its ``listening on`` log
lines), waits for ``/ping``, and stops it with SIGTERM, then SIGKILL after a deadline.
Also: a raw V1 peer, tiny HTTP helpers, and ``wait_until``.
"""
from __future__ import annotations

import json
import re
import signal
import socket
import struct
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, TypeVar

HOST = "127.0.0.1"
START_TIMEOUT = 15.0
STOP_TIMEOUT = 10.0
T = TypeVar("T")


def wait_until(predicate: Callable[[], T], timeout: float, message: str = "", interval: float = 0.02) -> T:
    """Poll ``predicate`` until it returns something truthy (returned) or fail at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout:.1f}s: {message}")
        time.sleep(interval)


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def nsqlookupd_command() -> list[str]:
    script = Path(sys.executable).with_name("nsqlookupd")
    if script.exists():
        return [str(script)]
    return [sys.executable, "-c", "from nsqlookupd.cli import main; main()"]


StartLookupd = Callable[..., "ServerProcess"]  # the start_lookupd fixture: (*flags, **ports)

_LISTENING = re.compile(rb"(TCP|HTTP): listening on (\S+):(\d+)")


class ServerProcess:
    def __init__(self, log_path: Path, *flags: str, command: list[str] | None = None,
                 tcp_port: int = 0, http_port: int = 0) -> None:
        self.command = command or nsqlookupd_command()
        self.flags = list(flags)
        self.log_path = log_path
        self.requested = (tcp_port, http_port)
        self.tcp_port = self.http_port = 0
        self.proc: subprocess.Popen[bytes] | None = None

    # -- lifecycle -----------------------------------------------------------
    def start(self) -> "ServerProcess":
        assert self.proc is None, "already running"
        offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        argv = [*self.command, f"--tcp-address={HOST}:{self.requested[0]}",
                f"--http-address={HOST}:{self.requested[1]}", f"--broadcast-address={HOST}", *self.flags]
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        try:
            ports = wait_until(lambda: self._listening_ports(offset), START_TIMEOUT, "listening lines in the log")
            self.tcp_port, self.http_port = ports
            wait_until(self._answers_ping, START_TIMEOUT, "/ping answers OK")
        except BaseException:
            self.kill()
            raise
        return self

    def _listening_ports(self, offset: int) -> tuple[int, int] | None:
        if self.proc is not None and self.proc.poll() is not None:
            raise AssertionError(f"server exited with {self.proc.returncode} during start:\n{self.log()}")
        found = {m.group(1): int(m.group(3)) for m in _LISTENING.finditer(self.log_path.read_bytes()[offset:])}
        return (found[b"TCP"], found[b"HTTP"]) if len(found) == 2 else None

    def _answers_ping(self) -> bool:
        try:
            return http_get(self.url("/ping")).body == b"OK"
        except OSError:
            return False

    def stop(self, sig: int = signal.SIGTERM, timeout: float = STOP_TIMEOUT) -> int | None:
        """Signal, wait up to ``timeout``, then SIGKILL. Returns the exit code of a
        graceful exit, None when it had to be killed. A later ``start`` uses the same ports."""
        if self.proc is None:
            return None
        proc, self.proc = self.proc, None
        self.requested = (self.tcp_port, self.http_port)
        if proc.poll() is None:
            proc.send_signal(sig)
            try:
                return proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(STOP_TIMEOUT)
                return None
        return proc.returncode

    def kill(self) -> None:
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait(STOP_TIMEOUT)
            self.proc = None

    def restart(self) -> None:
        """Stop, then start again on the same ports."""
        assert self.stop() == 0
        self.start()

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    # -- talking to it -------------------------------------------------------
    @property
    def tcp_address(self) -> str:
        return f"{HOST}:{self.tcp_port}"

    @property
    def http_address(self) -> str:
        return f"{HOST}:{self.http_port}"

    def url(self, path: str) -> str:
        return f"http://{HOST}:{self.http_port}{path}"

    def get(self, path: str, headers: dict[str, str] | None = None) -> "HttpAnswer":
        return http_get(self.url(path), headers)

    def post(self, path: str) -> "HttpAnswer":
        return http_request("POST", self.url(path))

    def peer(self, magic: bytes = b"  V1") -> "V1Peer":
        return V1Peer(HOST, self.tcp_port, magic)

    def lookup_tcp_ports(self, topic: str) -> set[int]:
        answer = self.get(f"/lookup?topic={topic}")
        return {p["tcp_port"] for p in answer.json()["producers"]} if answer.status == 200 else set()


# ---------------------------------------------------------------------------
# HTTP
# ---------------------------------------------------------------------------
@dataclass
class HttpAnswer:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


def http_request(method: str, url: str, headers: dict[str, str] | None = None,
                 body: bytes | None = None, timeout: float = 5.0) -> HttpAnswer:
    data = body if body is not None else (b"" if method in ("POST", "PUT") else None)
    request = urllib.request.Request(url, data=data, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as resp:
            return HttpAnswer(resp.status, dict(resp.headers), resp.read())
    except urllib.error.HTTPError as e:
        return HttpAnswer(e.code, dict(e.headers or {}), e.read())


def http_get(url: str, headers: dict[str, str] | None = None) -> HttpAnswer:
    return http_request("GET", url, headers)


# ---------------------------------------------------------------------------
# a raw V1 peer
# ---------------------------------------------------------------------------
class V1Peer:
    """A blocking socket speaking lookupd's V1 protocol byte by byte."""

    def __init__(self, host: str, port: int, magic: bytes = b"  V1", timeout: float = 5.0) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout)
        if magic:
            self.sock.sendall(magic)

    def __enter__(self) -> "V1Peer":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.sock.close()

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def _read_exact(self, n: int) -> bytes:
        out = b""
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            if not chunk:
                raise EOFError(f"connection closed after {len(out)} of {n} bytes")
            out += chunk
        return out

    def read_answer(self) -> bytes:
        (size,) = struct.unpack(">I", self._read_exact(4))
        return self._read_exact(size)

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

