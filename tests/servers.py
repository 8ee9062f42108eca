"""Real nsqd / nsqlookupd processes for tests: free 127.0.0.1 ports, a private data
directory, readiness by /ping, and a stop that always ends the process.

Ports: by default a free port is picked before start. Pass ``tcp_port=0, http_port=0``
to let the server bind any port itself (no window in which another process can take
it); the real ports are then read from its ``TCP: listening on`` / ``HTTP: listening
on`` log lines, so do not combine that with a log level above info. Either way a
``restart()`` comes back on the same ports.
"""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, TypeVar

from nsq_local.processes import free_port as free_port  # the tests' servers get ports the local cluster's way

BIN = Path(sys.executable).parent
HOST = "127.0.0.1"
T = TypeVar("T")

def wait_for(predicate: Callable[[], T], timeout: float = 10.0, interval: float = 0.02,
             message: str = "condition") -> T:
    """Poll until ``predicate()`` is truthy; return it. AssertionErrors count as "not yet"."""
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while True:
        try:
            value = predicate()
            if value:
                return value
        except (AssertionError, OSError) as e:
            last = e
        if time.monotonic() > deadline:
            raise AssertionError(f"{message} not met within {timeout}s" + (f" (last: {last})" if last else ""))
        time.sleep(interval)


@dataclass
class HttpAnswer:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)

    def value(self) -> Any:
        """The body as NSQ's servers mean it: JSON when they say so, else text (Go's
        nsqd answers a string option of /config as text)."""
        if self.headers.get("Content-Type", "").startswith("application/json"):
            return self.json()
        return self.body.decode()


def request(method: str, url: str, body: bytes | None = None, headers: dict[str, str] | None = None,
            timeout: float = 10.0) -> HttpAnswer:
    """One HTTP request; error statuses are answers too, not exceptions."""
    data = body if body is not None else (b"" if method in ("POST", "PUT") else None)
    req = urllib.request.Request(url, data=data, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return HttpAnswer(resp.status, dict(resp.headers), resp.read())
    except urllib.error.HTTPError as e:
        return HttpAnswer(e.code, dict(e.headers or {}), e.read())


def http(method: str, url: str, body: bytes | None = None, timeout: float = 10.0) -> tuple[int, bytes]:
    answer = request(method, url, body, timeout=timeout)
    return answer.status, answer.body


_LISTENING = re.compile(rb"\b(TCP|HTTP): listening on (\S+):(\d+)")


class ServerProcess:
    program = ""
    ping_path = "/ping"  # readiness: 200 here

    def __init__(self, workdir: Path, flags: dict[str, Any] | None = None, host: str = HOST,
                 tcp_port: int | None = None, http_port: int | None = None) -> None:
        """``tcp_port``/``http_port``: None picks a free one now, 0 lets the server choose."""
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.host = host
        self.tcp_port = free_port(host) if tcp_port is None else tcp_port
        self.http_port = free_port(host) if http_port is None else http_port
        self.flags = dict(flags or {})
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = self.workdir / f"{self.program}.log"

    def argv(self) -> list[str]:
        args = [str(BIN / self.program), f"--tcp-address={self.host}:{self.tcp_port}",
                f"--http-address={self.host}:{self.http_port}", f"--broadcast-address={self.host}"]
        for key, value in self.flags.items():
            values = value if isinstance(value, list) else [value]
            args += [f"--{key}={v}" for v in values]
        return args

    @property
    def tcp_address(self) -> str:
        return f"{self.host}:{self.tcp_port}"

    @property
    def http_address(self) -> str:
        return f"{self.host}:{self.http_port}"

    def url(self, path: str) -> str:
        return f"http://{self.host}:{self.http_port}{path}"

    def start(self, timeout: float = 20.0) -> "ServerProcess":
        assert self.proc is None, f"{self.program} is already running"
        log_offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(self.argv(), stdout=log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, cwd=self.workdir, start_new_session=True)
        log.close()

        def ready() -> bool:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.program} exited with {self.proc.returncode}:\n{self.log()}")
            if 0 in (self.tcp_port, self.http_port) and not self._read_listening_ports(log_offset):
                return False
            return self.answers_ping()
        try:
            wait_for(ready, timeout, message=f"{self.program} answers /ping")
        except BaseException:
            self.kill()
            raise
        return self

    def answers_ping(self) -> bool:
        """Whether the server answers its readiness path now (over HTTPS where a subclass
        closes plain HTTP)."""
        status, _ = http("GET", self.url(self.ping_path), timeout=1)
        return status == 200

    def _read_listening_ports(self, log_offset: int) -> bool:
        """Take the ports this start bound from its log lines; False until both are there."""
        with open(self.log_path, "rb") as f:
            f.seek(log_offset)
            found = {m.group(1): int(m.group(3)) for m in _LISTENING.finditer(f.read())}
        if len(found) < 2:
            return False
        self.tcp_port, self.http_port = found[b"TCP"], found[b"HTTP"]
        return True

    def restart(self, timeout: float = 20.0) -> "ServerProcess":
        """A clean stop (exit code 0), then a start on the same ports."""
        code = self.stop()
        assert code == 0, f"{self.program} exited with {code} on SIGTERM:\n{self.log()}"
        return self.start(timeout)

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-8000:]
        except OSError:
            return ""

    def signal(self, sig: int) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, sig)

    def freeze(self, timeout: float = 5.0) -> None:
        """SIGSTOP, and wait until every thread of the process is stopped (a multi-threaded
        server such as Go's can answer a little longer than the signal takes to send)."""
        assert self.proc is not None
        self.signal(signal.SIGSTOP)
        tasks = Path(f"/proc/{self.proc.pid}/task")

        def frozen() -> bool:
            states = [(t / "stat").read_text().rsplit(")", 1)[1].split()[0] for t in tasks.iterdir()]
            return all(state in ("T", "t") for state in states)
        if tasks.exists():
            wait_for(frozen, timeout, interval=0.005, message=f"{self.program} stopped by SIGSTOP")

    def stop(self, timeout: float = 20.0, sig: int | None = None) -> int | None:
        """``sig`` (SIGTERM by default), then SIGKILL after ``timeout``; returns the exit
        code (negative when a signal ended it)."""
        if self.proc is None:
            return None
        self.signal(signal.SIGTERM if sig is None else sig)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.signal(signal.SIGKILL)
            self.proc.wait(10)
        code = self.proc.returncode
        self.proc = None
        return code

    def kill(self) -> None:
        if self.proc is not None:
            self.signal(signal.SIGKILL)
            self.proc.wait(10)
            self.proc = None

    def get(self, path: str, headers: dict[str, str] | None = None) -> HttpAnswer:
        return request("GET", self.url(path), headers=headers)

    def post(self, path: str, body: bytes | None = None) -> HttpAnswer:
        return request("POST", self.url(path), body)

    def config(self, opt: str) -> Any:
        """``GET /config/<opt>``'s value (nsqd)."""
        answer = self.get(f"/config/{opt}")
        assert answer.status == 200, (opt, answer.status, answer.body)
        return answer.value()

    def get_json(self, path: str) -> Any:
        status, body = http("GET", self.url(path))
        assert status == 200, (status, body)
        return json.loads(body)


class Nsqd(ServerProcess):
    program = "nsqd"

    def argv(self) -> list[str]:
        args = super().argv()
        if not any(a.startswith("--data-path") for a in args):
            args.append(f"--data-path={self.workdir / 'data'}")
        return args

    def stats(self, topic: str = "", channel: str = "") -> dict:
        q = "/stats?format=json" + (f"&topic={topic}" if topic else "") + (f"&channel={channel}" if channel else "")
        return self.get_json(q)

    def topic(self, name: str) -> dict | None:
        return next((t for t in self.stats()["topics"] if t["topic_name"] == name), None)

    def channel(self, topic: str, name: str) -> dict | None:
        t = self.topic(topic)
        return next((c for c in t["channels"] if c["channel_name"] == name), None) if t else None


class Nsqlookupd(ServerProcess):
    program = "nsqlookupd"

    def producers(self, topic: str) -> list[dict]:
        """/lookup's producers for ``topic``; none when lookupd does not know the topic."""
        answer = self.get(f"/lookup?topic={topic}")
        return answer.json()["producers"] if answer.status == 200 else []

    def producer_tcp_ports(self, topic: str) -> set[int]:
        return {p["tcp_port"] for p in self.producers(topic)}
