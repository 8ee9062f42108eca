"""nsqd processes for the benchmarks: ours, Go's reference, and the one being measured
(peak RSS and CPU seconds read from /proc while it runs)."""
from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import pinning
from cpu_limit import CpuLimit
from fleet import cpu_times

HOST = "127.0.0.1"
# ``NSQD_OURS`` names another command for ours (e.g. a tree run as ``env PYTHONPATH=... python -m
# nsqd.cli``, launched the same way as a ``--previous`` one so the two compare like for like)
OURS = os.environ.get("NSQD_OURS") or str(Path(sys.executable).parent / "nsqd")

SHARED_GO = Path(__file__).resolve().parents[1].parent / "shared" / "nsq-v1.3.0" / "bin"


def reference_nsqd() -> str:
    """Go's nsqd: ``NSQD_REF`` when set (empty: none), else ../shared/nsq-v1.3.0 when there."""
    if "NSQD_REF" in os.environ:
        return os.environ["NSQD_REF"]
    go = SHARED_GO / "nsqd"
    return str(go) if go.is_file() else ""


def go_tool(name: str) -> str:
    """One of Go NSQ's tools (bench_writer, bench_reader) beside the reference nsqd."""
    ref = reference_nsqd()
    candidates = [Path(shlex.split(ref)[0]).parent / name] if ref else []
    candidates.append(SHARED_GO / name)
    for path in candidates:
        if path.is_file():
            return str(path)
    return ""



def free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


class Server:
    """One nsqd process, watched for peak RSS and CPU time; under ``cpu_limit`` CPUs (a
    cgroup's quota, as a pod's CPU limit) when given."""

    def __init__(self, command: str, flags: list[str], cpu_limit: float | None = None) -> None:
        self.tmp = tempfile.TemporaryDirectory(prefix="nsq-bench-")
        self.limit = CpuLimit(cpu_limit) if cpu_limit else None
        self.tcp, self.http = free_port(), free_port()
        argv = shlex.split(command) + [f"--tcp-address={HOST}:{self.tcp}", f"--http-address={HOST}:{self.http}",
                                       f"--data-path={self.tmp.name}", *flags]
        argv = pinning.server_argv(argv)
        self.proc = subprocess.Popen(self.limit.argv(argv) if self.limit else argv, env=pinning.server_env(),
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        self.peak_rss = 0
        self._stop = threading.Event()
        self.cpu0 = 0.0
        deadline = time.monotonic() + 20
        while True:
            try:
                with urllib.request.urlopen(f"http://{HOST}:{self.http}/ping", timeout=1):
                    break
            except OSError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    self.close()
                    raise RuntimeError(f"{command} did not start")
                time.sleep(0.05)
        self.cpu0 = self.cpu_seconds()
        threading.Thread(target=self._watch, daemon=True).start()

    @property
    def address(self) -> str:
        return f"{HOST}:{self.tcp}"

    def rss(self) -> int:
        try:
            with open(f"/proc/{self.proc.pid}/statm") as f:
                return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        except OSError:
            return 0

    def cpu_seconds(self) -> float:
        try:
            return sum(cpu_times(self.proc.pid))
        except OSError:
            return 0.0

    def _watch(self) -> None:
        while not self._stop.wait(0.05):
            self.peak_rss = max(self.peak_rss, self.rss())

    def post(self, path: str, body: bytes = b"") -> None:
        urllib.request.urlopen(urllib.request.Request(f"http://{HOST}:{self.http}{path}", data=body,
                                                      method="POST"), timeout=30).read()

    def wait_drained(self, topic: str, timeout: float = 120.0) -> None:
        """Until the topic and all its channels hold nothing, queued or in flight."""
        deadline = time.monotonic() + timeout
        url = f"http://{HOST}:{self.http}/stats?format=json&topic={topic}"
        while True:
            with urllib.request.urlopen(url, timeout=30) as resp:
                topics = json.load(resp)["topics"]
            if all(t["depth"] == 0 and all(c["depth"] == 0 and c["in_flight_count"] == 0 for c in t["channels"])
                   for t in topics):
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"{topic} still holds messages after {timeout}s")
            time.sleep(0.05)

    def close(self) -> float:
        cpu = self.cpu_seconds() - self.cpu0
        self._stop.set()
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        self.tmp.cleanup()
        if self.limit:
            self.limit.close()
        return cpu


