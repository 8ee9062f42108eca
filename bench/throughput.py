"""Throughput beside Go's nsqd v1.3.0 (issue 16): one table, ours and Go alternated in the
same run, medians of --runs. Prints figures, asserts nothing.

    .venv/bin/python bench/throughput.py [--runs 3] [--seconds 5] [--only bench_reader,mpub_100]
    NSQD_REF=/path/to/nsqd .venv/bin/python bench/throughput.py   # another reference than ../shared
    .venv/bin/python bench/throughput.py --previous "env PYTHONPATH=<tree>/broker:<tree>/protocol .venv/bin/python -m nsqd.cli"

Go's nsqd and its load generators (bench_writer, bench_reader) come from
../shared/nsq-v1.3.0/bin unless NSQD_REF names another nsqd (its tools are looked for
beside it first). Every server runs with --mem-queue-size=1000000 --max-rdy-count=5000.

| row | load |
|---|---|
| bench_reader | Go's bench_writer (batch 200) for 2 x --seconds, then bench_reader (RDY 2500, FIN each) for --seconds |
| bench_writer_200 | Go's bench_writer, MPUB of 200, for --seconds |
| bench_writer_1 | Go's bench_writer, batch 1 (each PUB waits for its OK), for --seconds |
| mpub_100 | the Python generator (bench/loadgen.py): MPUB of 100, 8 in flight |
| consume | the Python generator: MPUB 200 load, then SUB, RDY 1000, FIN each |
| pub_pipelined | the Python generator: PUBs in windows of 256 |

``--per-core``: each nsqd under ``taskset -c 0`` (Go with GOMAXPROCS=1), the load
generators on CPU 1 (bench/pinning.py).

Per row: msgs/s, ours/Go, peak RSS, and nsqd's CPU (user+system) per message moved.
``--previous`` adds a third server to every row (another version of ours, e.g. a tree
from ``git archive``), alternated with the other two, and its columns with ours/previous.
"""
from __future__ import annotations

import argparse
import multiprocessing as mp
import re
import statistics
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import pinning  # noqa: E402
import run  # noqa: E402
from nsqd_proc import OURS, Server, go_tool, reference_nsqd  # noqa: E402

FLAGS = ["--mem-queue-size=1000000", "--max-rdy-count=5000"]
PYTHON_ROWS = {"mpub_100", "consume", "pub_pipelined"}
ROWS = ["bench_reader", "bench_writer_200", "bench_writer_1", "mpub_100", "consume", "pub_pipelined"]
_OPS = re.compile(rb"([0-9.]+)ops/s")


@dataclass
class Figures:
    rate: float
    rss_mib: float
    cpu_us: float  # nsqd CPU per message moved in the measured phase


def _go(tool: str, server: Server, seconds: float, *flags: str) -> float:
    done = subprocess.run([go_tool(tool), f"-nsqd-tcp-address={server.address}", "-topic=bench",
                           f"-runfor={seconds}s", *flags], capture_output=True, timeout=seconds + 120)
    match = _OPS.search(done.stdout + done.stderr)
    if done.returncode != 0 or match is None:
        raise RuntimeError(f"{tool} failed: {done.stdout!r} {done.stderr!r}")
    return float(match.group(1))


def go_row(name: str, command: str, seconds: float) -> Figures:
    server = Server(command, FLAGS)
    try:
        if name == "bench_reader":
            _go("bench_writer", server, 2 * seconds, "-batch-size=200")
            cpu0 = server.cpu_seconds()
            rate = _go("bench_reader", server, seconds, "-channel=ch", "-rdy=2500")
        else:
            cpu0 = server.cpu_seconds()
            rate = _go("bench_writer", server, seconds, f"-batch-size={name.rsplit('_', 1)[1]}")
        cpu = server.cpu_seconds() - cpu0
    finally:
        server.close()
    return Figures(rate, server.peak_rss / 2**20, cpu / (rate * seconds) * 1e6)


def python_row(name: str, command: str, scale: float) -> Figures:
    result = run.run_workload(name, command, scale, [])
    return Figures(result.rate, result.rss_mib, result.cpu_us)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=5.0, help="length of the Go-tool rows")
    parser.add_argument("--scale", type=float, default=1.0, help="message counts of the Python rows")
    parser.add_argument("--only", default="", help="comma-separated rows")
    parser.add_argument("--previous", default="", help="command of a third nsqd to alternate with (ours before a change)")
    pinning.add_argument(parser)
    args = parser.parse_args()
    pinning.apply(args.per_core)
    run.POOL = mp.Pool(4)
    ref = reference_nsqd()
    if not ref:
        sys.exit("no Go nsqd: set NSQD_REF or put NSQ v1.3.0 in ../shared/nsq-v1.3.0")
    names = [r for r in ROWS if not args.only or r in args.only.split(",")]
    servers = [("ours", OURS), ("go", ref)] + ([("prev", args.previous)] if args.previous else [])
    extra = f"{'prev msgs/s':>12}{'ours/prev':>10}{'prev RSS':>9}{'prev us/msg':>12}" if args.previous else ""
    print(f"{'row':<18}{'ours msgs/s':>12}{'Go msgs/s':>12}{'ours/Go':>9}{'ours RSS':>10}{'Go RSS':>8}"
          f"{'ours us/msg':>12}{'Go us/msg':>10}{extra}", flush=True)
    for name in names:
        runs: dict[str, list[Figures]] = {label: [] for label, _ in servers}
        for _ in range(args.runs):  # alternated, so all see the same machine
            for label, command in servers:
                if name in PYTHON_ROWS:
                    runs[label].append(python_row(name, command, args.scale))
                else:
                    runs[label].append(go_row(name, command, args.seconds))
        med = {label: {f: statistics.median(getattr(r, f) for r in rs) for f in ("rate", "rss_mib", "cpu_us")}
               for label, rs in runs.items()}
        ours, go = med["ours"], med["go"]
        line = (f"{name:<18}{ours['rate']:>12.0f}{go['rate']:>12.0f}{ours['rate'] / go['rate']:>9.2f}"
                f"{ours['rss_mib']:>10.0f}{go['rss_mib']:>8.0f}{ours['cpu_us']:>12.2f}{go['cpu_us']:>10.2f}")
        if "prev" in med:
            prev = med["prev"]
            line += (f"{prev['rate']:>12.0f}{ours['rate'] / prev['rate']:>10.2f}{prev['rss_mib']:>9.0f}"
                     f"{prev['cpu_us']:>12.2f}")
        print(line, flush=True)


if __name__ == "__main__":
    mp.set_start_method("spawn")
    try:
        main()
    finally:
        if run.POOL is not None:
            run.POOL.terminate()
