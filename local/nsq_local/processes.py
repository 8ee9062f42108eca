"""Start and stop nsqd / nsqlookupd / nsqadmin as child processes on loopback addresses."""
from __future__ import annotations

import asyncio
import os
import random
import shutil
import signal
import socket
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp

from nsq_local.port_reservations import reserve


def _ephemeral_ports() -> tuple[int, int]:
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999  # Linux's default


_handed_out: set[int] = set()
_handed_out_lock = threading.Lock()


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing is bound to, below the kernel's ephemeral range: a port from that range
    can be given to any outgoing connection, which then holds it while the server that was
    meant to listen there is restarting (or has not bound it yet), and that start fails.

    A port is handed out once per process: a cluster takes all its ports before any node
    binds one, so a port still free when asked for twice would go to two nodes. Nor is it
    handed out by another process while this one lives (see ``port_reservations``)."""
    low = _ephemeral_ports()[0]
    candidates = range(max(1024, low - 12000), low)
    with _handed_out_lock:
        for _ in range(200):
            port = random.choice(candidates)
            if port not in _handed_out and _bindable(host, port) and reserve(port):
                break
        else:
            port = _any_port(host)  # nearly all taken: any the kernel gives
        _handed_out.add(port)
        return port


def _bindable(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
        return True


def _any_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def program(name: str) -> str:
    """The console script next to this interpreter, else the one on PATH."""
    local = Path(sys.executable).parent / name
    return str(local) if local.exists() else (shutil.which(name) or name)


@dataclass
class Node:
    kind: str  # "nsqd", "nsqlookupd" or "nsqadmin" (HTTP only: its tcp_port goes unused)
    name: str
    workdir: Path
    host: str = "127.0.0.1"
    flags: dict[str, str | list[str]] = field(default_factory=dict)
    tcp_port: int = 0
    http_port: int = 0
    proc: asyncio.subprocess.Process | None = None

    def __post_init__(self) -> None:
        self.tcp_port = self.tcp_port or free_port(self.host)
        self.http_port = self.http_port or free_port(self.host)
        self.workdir.mkdir(parents=True, exist_ok=True)

    @property
    def tcp_address(self) -> str:
        return f"{self.host}:{self.tcp_port}"

    @property
    def http_address(self) -> str:
        return f"{self.host}:{self.http_port}"

    def argv(self) -> list[str]:
        args = [program(self.kind), f"--http-address={self.http_address}"]
        if self.kind != "nsqadmin":
            args += [f"--tcp-address={self.tcp_address}", f"--broadcast-address={self.host}"]
        if self.kind == "nsqd":
            args.append(f"--data-path={self.workdir / 'data'}")
        for key, value in self.flags.items():
            for v in value if isinstance(value, list) else [value]:
                args.append(f"--{key}={v}")
        return args

    async def start(self, timeout: float = 20.0) -> None:
        if self.kind == "nsqd":
            (self.workdir / "data").mkdir(exist_ok=True)
        log = open(self.workdir / f"{self.kind}.log", "ab")
        try:
            self.proc = await asyncio.create_subprocess_exec(
                *self.argv(), stdout=log, stderr=log, stdin=asyncio.subprocess.DEVNULL,
                start_new_session=True)
        finally:
            log.close()
        deadline = time.monotonic() + timeout
        async with aiohttp.ClientSession() as http:
            while True:
                if self.proc.returncode is not None:
                    raise RuntimeError(f"{self.name} exited with {self.proc.returncode}; see {self.workdir}")
                try:
                    async with http.get(f"http://{self.http_address}/ping",
                                        timeout=aiohttp.ClientTimeout(total=1)) as r:
                        if r.status == 200:
                            return
                except (aiohttp.ClientError, asyncio.TimeoutError):
                    pass
                if time.monotonic() > deadline:
                    await self.kill()
                    raise RuntimeError(f"{self.name} did not answer /ping within {timeout}s")
                await asyncio.sleep(0.05)

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.returncode is None

    def signal(self, sig: int) -> None:
        if self.running:
            assert self.proc is not None
            os.killpg(self.proc.pid, sig)

    async def wait_exited(self, timeout: float) -> int | None:
        """Wait for the process to end by itself; its exit code, or None when it is still
        running after ``timeout`` seconds (it is left running)."""
        proc = self.proc
        if proc is None:
            return None
        try:
            async with asyncio.timeout(timeout):
                await proc.wait()
        except asyncio.TimeoutError:
            return None
        self.proc = None
        return proc.returncode

    async def stop(self, timeout: float = 30.0) -> int | None:
        """SIGTERM, wait; SIGKILL after ``timeout``."""
        proc = self.proc
        if proc is None:
            return None
        if proc.returncode is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                async with asyncio.timeout(timeout):
                    await proc.wait()
            except asyncio.TimeoutError:
                os.killpg(proc.pid, signal.SIGKILL)
                await proc.wait()
        self.proc = None
        return proc.returncode

    async def kill(self) -> None:
        proc = self.proc
        if proc is not None and proc.returncode is None:
            os.killpg(proc.pid, signal.SIGKILL)
            await proc.wait()
        self.proc = None
