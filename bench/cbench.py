"""Publish throughput with a load generator in C (bench/cwriter.c, built here with cc), the
way NSQ's bench_writer measures it: W connections, each sending PUB (batch 1) or MPUB
(batch N) and waiting for its OK before the next. Prints figures, asserts nothing.

    .venv/bin/python bench/cbench.py [--runs 3] [--seconds 5] [--workers 2]
    NSQD_REF=/path/to/go/nsqd .venv/bin/python bench/cbench.py   # adds the reference and ratios

Why C: a single-threaded Python generator makes about 22k round trips/s against a server
that answers without parsing anything, so a Python client cannot tell a fast nsqd from a
slower one on the synchronous-PUB row.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run import HOST, OURS, Server  # noqa: E402

SOURCE = Path(__file__).resolve().parent / "cwriter.c"
BODY_SIZE = 200
ROWS = [("pub_sync", 1), ("mpub_200", 200)]


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
    rss_mib: float
    cpu_s: float


def one_run(binary: str, command: str, batch: int, seconds: float, workers: int) -> Figures:
    server = Server(command, ["--mem-queue-size=100000000"])
    try:
        done = subprocess.run([binary, HOST, str(server.tcp), "bench", str(BODY_SIZE), str(batch), str(seconds),
                               str(workers)], capture_output=True, text=True, timeout=seconds + 60)
        if done.returncode != 0:
            raise RuntimeError(f"cwriter failed ({done.returncode}): {done.stdout} {done.stderr}")
        result = json.loads(done.stdout)
    finally:
        cpu = server.close()
    return Figures(result["messages"] / result["seconds"], result["p50_us"], result["p99_us"],
                   server.peak_rss / 2**20, cpu)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 2,
                        help="connections, one thread each (bench_writer runs one per core)")
    args = parser.parse_args()
    servers = [("ours", OURS)] + ([("ref", os.environ["NSQD_REF"])] if os.environ.get("NSQD_REF") else [])
    with tempfile.TemporaryDirectory(prefix="nsq-cbench-") as tmp:
        binary = build(tmp)
        print(f"{'workload':<12}{'server':<6}{'msgs/s':>10}{'MiB/s':>8}{'p50 us':>8}{'p99 us':>8}"
              f"{'peak RSS MiB':>14}{'cpu s':>7}{'ours/ref':>9}")
        for name, batch in ROWS:
            rows = {}
            for label, command in servers:
                runs = [one_run(binary, command, batch, args.seconds, args.workers) for _ in range(args.runs)]
                rows[label] = Figures(*(statistics.median(getattr(r, f) for r in runs)
                                        for f in ("rate", "p50_us", "p99_us", "rss_mib", "cpu_s")))
            for label, r in rows.items():
                ratio = f"{r.rate / rows['ref'].rate:.2f}" if label == "ours" and "ref" in rows else ""
                print(f"{name:<12}{label:<6}{r.rate:>10.0f}{r.rate * BODY_SIZE / 2**20:>8.1f}{r.p50_us:>8.0f}"
                      f"{r.p99_us:>8.0f}{r.rss_mib:>14.0f}{r.cpu_s:>7.1f}{ratio:>9}", flush=True)


if __name__ == "__main__":
    main()
