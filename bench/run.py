"""nsqd benchmarks: prints figures, asserts nothing.

    .venv/bin/python bench/run.py [--runs 3] [--scale 1.0] [--only pub_sync,mpub]
    NSQD_REF=/path/to/go/nsqd .venv/bin/python bench/run.py   # adds the reference and ratios

Every workload runs in load-generator processes separate from nsqd (so client and server
do not share a core), against a fresh nsqd each run; a row is the median of the runs.
nsqd's peak RSS and CPU seconds are read from /proc while it runs.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))
import loadgen  # noqa: E402

HOST = "127.0.0.1"
OURS = str(Path(sys.executable).parent / "nsqd")


def free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


class Server:
    """One nsqd process, watched for peak RSS and CPU time."""

    def __init__(self, command: str, flags: list[str]) -> None:
        self.tmp = tempfile.TemporaryDirectory(prefix="nsq-bench-")
        self.tcp, self.http = free_port(), free_port()
        argv = shlex.split(command) + [f"--tcp-address={HOST}:{self.tcp}", f"--http-address={HOST}:{self.http}",
                                       f"--data-path={self.tmp.name}", *flags]
        self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     start_new_session=True)
        self.peak_rss = 0
        self._stop = threading.Event()
        deadline = time.monotonic() + 20
        while True:
            try:
                with urllib.request.urlopen(f"http://{HOST}:{self.http}/ping", timeout=1):
                    break
            except OSError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
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
            with open(f"/proc/{self.proc.pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
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
        return cpu


def _in_process(fn: Callable[..., dict], *args: object) -> "mp.pool.AsyncResult[dict]":
    return POOL.apply_async(fn, args)


@dataclass
class Memory:
    """memory_1m: nsqd's RSS idle, with every message queued, and after all were consumed."""
    idle_mib: float
    queued_mib: float
    drained_mib: float
    bytes_per_msg: float  # RSS growth per queued message


@dataclass
class Result:
    rate: float
    mib: float
    p50_ms: float | None
    p99_ms: float | None
    rss_mib: float
    cpu_s: float
    memory: Memory | None = None


def run_workload(name: str, command: str, scale: float, extra_flags: list[str]) -> Result:
    n = lambda base: max(1000, int(base * scale))  # noqa: E731
    flags = ["--mem-queue-size=1000000", "--max-rdy-count=5000", *extra_flags]
    server = Server(command, flags)
    latencies: list[float] = []
    memory: Memory | None = None
    try:
        topic = f"bench-{name}"
        if name == "pub_sync":
            r = _in_process(loadgen.pub_sync, server.address, topic, n(20000)).get()
            count, seconds, latencies = r["messages"], r["seconds"], r["latencies"]
        elif name == "pub_latency_10k":
            r = _in_process(loadgen.pub_paced, server.address, topic, n(30000), 10000.0).get()
            count, seconds, latencies = r["messages"], r["seconds"], r["latencies"]
        elif name == "pub_pipelined":
            r = _in_process(loadgen.pub_pipelined, server.address, topic, n(200000)).get()
            count, seconds = r["messages"], r["seconds"]
        elif name in ("mpub_100", "mpub_200"):
            r = _in_process(loadgen.mpub, server.address, topic, n(500000), int(name[-3:])).get()
            count, seconds = r["messages"], r["seconds"]
        elif name == "dpub":
            r = _in_process(loadgen.dpub, server.address, topic, n(100000)).get()
            count, seconds = r["messages"], r["seconds"]
        elif name == "consume":
            total = n(300000)
            _in_process(loadgen.mpub, server.address, topic, total, 200).get()
            r = _in_process(loadgen.consume, server.address, topic, "c", total).get()
            count, seconds = r["messages"], r["seconds"]
        elif name == "fanout_3":
            total = n(100000)
            server.post(f"/topic/create?topic={topic}")
            for c in ("a", "b", "c"):
                server.post(f"/channel/create?topic={topic}&channel={c}")
            start = time.perf_counter()
            consumers = [_in_process(loadgen.consume, server.address, topic, c, total) for c in "abc"]
            _in_process(loadgen.mpub, server.address, topic, total, 100).get()
            for c in consumers:
                c.get()
            count, seconds = 3 * total, time.perf_counter() - start
        elif name == "mixed":
            total = n(200000)
            server.post(f"/topic/create?topic={topic}")
            server.post(f"/channel/create?topic={topic}&channel=c")
            start = time.perf_counter()
            consumer = _in_process(loadgen.consume, server.address, topic, "c", total)
            _in_process(loadgen.pub_pipelined, server.address, topic, total).get()
            consumer.get()
            count, seconds = 2 * total, time.perf_counter() - start
        elif name == "memory_1m":
            total = n(1_000_000)
            idle = server.rss()
            r = _in_process(loadgen.mpub, server.address, topic, total, 200).get()
            count, seconds = r["messages"], r["seconds"]
            queued = server.rss()
            _in_process(loadgen.consume, server.address, topic, "c", total).get()
            server.wait_drained(topic)
            memory = Memory(idle / 2**20, queued / 2**20, server.rss() / 2**20, (queued - idle) / count)
        else:
            raise ValueError(f"unknown workload {name}")
    finally:
        cpu = server.close()
    latencies.sort()
    pick = lambda q: latencies[min(len(latencies) - 1, int(q * len(latencies)))] * 1000 if latencies else None  # noqa: E731
    return Result(count / seconds, count * loadgen.BODY_SIZE / seconds / 2**20, pick(0.5), pick(0.99),
                  server.peak_rss / 2**20, cpu, memory)


WORKLOADS = ["pub_sync", "pub_pipelined", "mpub_100", "mpub_200", "dpub", "consume", "fanout_3", "mixed",
             "pub_latency_10k", "memory_1m"]


def median_result(results: list[Result]) -> Result:
    med = lambda xs: statistics.median(xs) if all(x is not None for x in xs) else None  # noqa: E731
    return Result(med([r.rate for r in results]), med([r.mib for r in results]), med([r.p50_ms for r in results]),
                  med([r.p99_ms for r in results]), med([r.rss_mib for r in results]), med([r.cpu_s for r in results]),
                  median_memory([r.memory for r in results]))


def median_memory(checks: list[Memory | None]) -> Memory | None:
    present = [m for m in checks if m is not None]
    if len(present) < len(checks):
        return None
    return Memory(*(statistics.median([getattr(m, f) for m in present])
                    for f in ("idle_mib", "queued_mib", "drained_mib", "bytes_per_msg")))


def fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--scale", type=float, default=1.0, help="multiply every message count")
    parser.add_argument("--only", default="", help="comma-separated workloads")
    parser.add_argument("--flags", default="", help="extra nsqd flags for every run, e.g. --sync-before-ack")
    args = parser.parse_args()
    names = [w for w in WORKLOADS if not args.only or w in args.only.split(",")]
    servers = [("ours", OURS)] + ([("ref", os.environ["NSQD_REF"])] if os.environ.get("NSQD_REF") else [])
    extra = shlex.split(args.flags)
    print(f"{'workload':<16}{'server':<6}{'msgs/s':>10}{'MiB/s':>8}{'p50 ms':>8}{'p99 ms':>8}"
          f"{'peak RSS MiB':>14}{'cpu s':>7}{'ours/ref':>9}")
    for name in names:
        rows = {}
        for label, command in servers:
            rows[label] = median_result([run_workload(name, command, args.scale, extra) for _ in range(args.runs)])
        for label, r in rows.items():
            ratio = ""
            if label == "ours" and "ref" in rows:
                ratio = f"{r.rate / rows['ref'].rate:.2f}"
            print(f"{name:<16}{label:<6}{r.rate:>10.0f}{r.mib:>8.1f}{fmt(r.p50_ms, '.2f'):>8}"
                  f"{fmt(r.p99_ms, '.2f'):>8}{r.rss_mib:>14.0f}{r.cpu_s:>7.1f}{ratio:>9}", flush=True)
            if r.memory is not None:
                m = r.memory
                print(f"{'':<22}RSS idle {m.idle_mib:.0f} MiB, all queued {m.queued_mib:.0f} MiB "
                      f"({m.bytes_per_msg:.0f} bytes per queued {loadgen.BODY_SIZE}-byte message), "
                      f"after consuming them all {m.drained_mib:.0f} MiB", flush=True)


if __name__ == "__main__":
    mp.set_start_method("spawn")
    POOL = mp.Pool(4)
    try:
        main()
    finally:
        POOL.terminate()
