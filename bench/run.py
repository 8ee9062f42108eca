"""nsqd benchmarks: prints figures, asserts nothing.

    .venv/bin/python bench/run.py [--runs 3] [--scale 1.0] [--only pub_sync,mpub]
    NSQD_REF=/path/to/go/nsqd .venv/bin/python bench/run.py   # another reference (default: ../shared's Go nsqd)

Every workload runs in load-generator processes separate from nsqd (so client and server
do not share a core), against a fresh nsqd each run; a row is the median of the runs.
nsqd's peak RSS and CPU seconds are read from /proc while it runs.
"""
from __future__ import annotations

import argparse
import multiprocessing as mp
import shlex
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))
import loadgen  # noqa: E402

from nsqd_proc import HOST, OURS, Server, free_port, reference_nsqd  # noqa: E402,F401  (others import them from here)


POOL: "mp.pool.Pool | None" = None  # made by whichever script runs the workloads


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
    cpu_us: float = 0.0  # nsqd CPU per message in the measured phase (after any preload)


def run_workload(name: str, command: str, scale: float, extra_flags: list[str]) -> Result:
    n = lambda base: max(1000, int(base * scale))  # noqa: E731
    flags = ["--mem-queue-size=1000000", "--max-rdy-count=5000", *extra_flags]
    server = Server(command, flags)
    latencies: list[float] = []
    memory: Memory | None = None
    mark = server.cpu_seconds()
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
            mark = server.cpu_seconds()
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
        phase_cpu = server.cpu_seconds() - mark
    finally:
        cpu = server.close()
    latencies.sort()
    pick = lambda q: latencies[min(len(latencies) - 1, int(q * len(latencies)))] * 1000 if latencies else None  # noqa: E731
    return Result(count / seconds, count * loadgen.BODY_SIZE / seconds / 2**20, pick(0.5), pick(0.99),
                  server.peak_rss / 2**20, cpu, memory, phase_cpu / count * 1e6)


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
    ref = reference_nsqd()
    servers = [("ours", OURS)] + ([("ref", ref)] if ref else [])
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
