"""Publish throughput and latency with a load generator in C (bench/cwriter.c, built here
with cc), the way NSQ's bench_writer measures: W connections, each sending PUB (batch 1)
or MPUB (batch N) and waiting for its OK before the next, for a fixed time; and PUB at a
fixed rate (10k msgs/s on one connection, sent when due whatever the answers' latency)
for latency under load. Prints figures, asserts nothing.

    .venv/bin/python bench/cbench.py [--runs 3] [--seconds 5] [--workers 2]
    NSQD_REF=/path/to/go/nsqd .venv/bin/python bench/cbench.py   # adds the reference and ratios
    .venv/bin/python bench/cbench.py --flags=--busy-poll-window=0   # flags for our nsqd only
    .venv/bin/python bench/cbench.py --null   # adds bench/null_nsqd.py: the floor for a Python server

Why C: a single-threaded Python generator makes about 22k round trips/s against a server
that answers without parsing anything, so a Python client cannot tell a fast nsqd from a
slower one on the synchronous-PUB row.
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run import HOST, OURS, Server  # noqa: E402

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "cwriter.c"
NULL_SERVER = f"{shlex.quote(sys.executable)} {shlex.quote(str(HERE / 'null_nsqd.py'))}"
BODY_SIZE = 200


@dataclass(frozen=True)
class Row:
    name: str
    batch: int
    rate: float = 0.0  # msgs/s in all; 0: each connection waits for every OK
    connections: int = 0  # 0: --workers


ROWS = [Row("pub_sync", 1), Row("mpub_200", 200), Row("pub_10k_rate", 1, rate=10000.0, connections=1)]


def build(out_dir: str) -> str:
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        sys.exit("cbench needs a C compiler (cc or gcc) on PATH")
    binary = os.path.join(out_dir, "cwriter")
    subprocess.run([compiler, "-O2", "-pthread", "-o", binary, str(SOURCE)], check=True)
    return binary


@dataclass
class Figures:
    rate: float
    p50_us: float
    p99_us: float
    p999_us: float
    rss_mib: float
    cpu_s: float


FIELDS = ("rate", "p50_us", "p99_us", "p999_us", "rss_mib", "cpu_s")


def one_run(binary: str, command: str, row: Row, seconds: float, workers: int, flags: list[str]) -> Figures:
    server = Server(command, ["--mem-queue-size=100000000", *flags])
    try:
        argv = [binary, HOST, str(server.tcp), "bench", str(BODY_SIZE), str(row.batch), str(seconds),
                str(row.connections or workers)] + ([str(row.rate)] if row.rate else [])
        done = subprocess.run(argv, capture_output=True, text=True, timeout=seconds + 60)
        if done.returncode != 0:
            raise RuntimeError(f"cwriter failed ({done.returncode}): {done.stdout} {done.stderr}")
        result = json.loads(done.stdout)
    finally:
        cpu = server.close()
    return Figures(result["messages"] / result["seconds"], result["p50_us"], result["p99_us"], result["p999_us"],
                   server.peak_rss / 2**20, cpu)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 2,
                        help="connections, one thread each (bench_writer runs one per core)")
    parser.add_argument("--flags", default="", help="extra flags for our nsqd, e.g. --busy-poll-window=0")
    parser.add_argument("--null", action="store_true", help="also measure bench/null_nsqd.py (the floor)")
    parser.add_argument("--only", default="", help="comma-separated rows: " + ",".join(r.name for r in ROWS))
    args = parser.parse_args()
    servers = [("ours", OURS, shlex.split(args.flags))]
    if os.environ.get("NSQD_REF"):
        servers.append(("ref", os.environ["NSQD_REF"], []))
    if args.null:
        servers.append(("null", NULL_SERVER, []))
    rows = [r for r in ROWS if not args.only or r.name in args.only.split(",")]
    with tempfile.TemporaryDirectory(prefix="nsq-cbench-") as tmp:
        binary = build(tmp)
        print(f"{'workload':<14}{'server':<6}{'msgs/s':>10}{'MiB/s':>8}{'p50 us':>8}{'p99 us':>8}{'p99.9 us':>9}"
              f"{'peak RSS MiB':>14}{'cpu s':>7}{'ours/ref':>9}")
        for row in rows:
            figures = {}
            for label, command, flags in servers:
                runs = [one_run(binary, command, row, args.seconds, args.workers, flags) for _ in range(args.runs)]
                figures[label] = Figures(*(statistics.median(getattr(r, f) for r in runs) for f in FIELDS))
            for label, r in figures.items():
                ratio = f"{r.rate / figures['ref'].rate:.2f}" if label == "ours" and "ref" in figures else ""
                print(f"{row.name:<14}{label:<6}{r.rate:>10.0f}{r.rate * BODY_SIZE / 2**20:>8.1f}{r.p50_us:>8.0f}"
                      f"{r.p99_us:>8.0f}{r.p999_us:>9.0f}{r.rss_mib:>14.0f}{r.cpu_s:>7.1f}{ratio:>9}", flush=True)


if __name__ == "__main__":
    main()
