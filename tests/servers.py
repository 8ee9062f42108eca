"""Real nsqd / nsqlookupd processes for tests: free 127.0.0.1 ports, a private data
directory, readiness by /ping, and a stop that always ends the process."""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Callable, TypeVar

BIN = Path(sys.executable).parent
HOST = "127.0.0.1"
T = TypeVar("T")


def free_port(host: str = HOST) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


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


def http(method: str, url: str, body: bytes | None = None, timeout: float = 10.0) -> tuple[int, bytes]:
    req = urllib.request.Request(url, data=body if body is not None else (b"" if method in ("POST", "PUT") else None),
                                 method=method)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


class ServerProcess:
    program = ""

    def __init__(self, workdir: Path, flags: dict[str, Any] | None = None, host: str = HOST) -> None:
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.host = host
        self.tcp_port = free_port(host)
        self.http_port = free_port(host)
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
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(self.argv(), stdout=log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, cwd=self.workdir, start_new_session=True)
        log.close()

        def ready() -> bool:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.program} exited with {self.proc.returncode}:\n{self.log()}")
            status, body = http("GET", self.url("/ping"), timeout=1)
            return status == 200
        wait_for(ready, timeout, message=f"{self.program} answers /ping")
        return self

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-8000:]
        except OSError:
            return ""

    def signal(self, sig: int) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, sig)

    def stop(self, timeout: float = 20.0) -> int | None:
        """SIGTERM, then SIGKILL after ``timeout``; returns the exit code."""
        if self.proc is None:
            return None
        self.signal(signal.SIGTERM)
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
