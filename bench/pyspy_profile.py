"""Profile our nsqd under one workload with py-spy and print the headline functions.

    .venv/bin/python bench/pyspy_profile.py consume [--scale 1.0] [--out /tmp/consume.txt]

Starts a fresh nsqd, attaches ``py-spy record --format raw`` to it, runs the workload's
load generator in another process, and prints nsqd's CPU seconds and the functions with
the largest self and inclusive share of the samples. The raw profile is kept at --out
(flamegraph.pl or speedscope read it).
"""
from __future__ import annotations

import argparse
import collections
import multiprocessing as mp
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fleet  # noqa: E402
import loadgen  # noqa: E402
import pinning  # noqa: E402
from run import OURS, Server  # noqa: E402

PY_SPY = os.environ.get("PY_SPY") or str(Path(sys.executable).parent / "py-spy")


def load(name: str, address: str, scale: float) -> None:
    n = lambda base: max(1000, int(base * scale))  # noqa: E731
    topic = f"profile-{name}"
    if name == "pub_sync":
        loadgen.pub_sync(address, topic, n(20000))
    elif name == "pub_pipelined":
        loadgen.pub_pipelined(address, topic, n(200000))
    elif name == "mpub_100":
        loadgen.mpub(address, topic, n(500000), 100)
    elif name == "consume":
        total = n(300000)
        loadgen.mpub(address, topic, total, 200)
        loadgen.consume(address, topic, "c", total)
    elif name == "consumers":
        fleet.consumers(address, topic, [f"c{i}" for i in range(10)], n(5000), 10_000)
    else:
        raise ValueError(f"unknown workload {name}")


def summarise(raw: Path, top: int) -> None:
    """py-spy's raw format: one ``frame;frame;...;leaf count`` line per distinct stack."""
    own: collections.Counter[str] = collections.Counter()
    inclusive: collections.Counter[str] = collections.Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack:
            continue
        count = int(count_text)
        # "function (path/file.py:line)" -> "function (file.py)": one figure per function
        frames = [f.split(" (")[0] + " (" + f.rsplit("/", 1)[-1].split(":")[0] + ")" if " (" in f else f
                  for f in stack.split(";")]
        total += count
        own[frames[-1]] += count
        for frame in set(frames):
            inclusive[frame] += count
    if not total:
        print("no samples")
        return
    for title, counter in (("self", own), ("inclusive", inclusive)):
        print(f"-- top {top} by {title} ({total} samples)")
        for frame, count in counter.most_common(top):
            print(f"{100 * count / total:6.1f}%  {frame}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("workload", choices=["pub_sync", "pub_pipelined", "mpub_100", "consume", "consumers"])
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--out", default="")
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--no-spy", action="store_true", help="only nsqd's CPU seconds")
    parser.add_argument("--native", action="store_true", help="py-spy --native: C frames too")
    pinning.add_argument(parser)
    args = parser.parse_args()
    pinning.apply(args.per_core)
    out = Path(args.out or f"/tmp/nsqd-profile-{args.workload}-{os.getpid()}.txt")
    server = Server(OURS, ["--mem-queue-size=1000000", "--max-rdy-count=5000"])
    spy = None
    try:
        if not args.no_spy:
            spy = subprocess.Popen([PY_SPY, "record", "-r", "250", "--format", "raw", "-o", str(out),
                                    "--pid", str(server.proc.pid), *(["--native"] if args.native else [])],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(1.0)  # py-spy attaches before the load starts
        started = time.perf_counter()
        proc = mp.get_context("spawn").Process(target=load, args=(args.workload, server.address, args.scale))
        proc.start()
        proc.join()
        elapsed = time.perf_counter() - started
    finally:
        if spy is not None:
            spy.send_signal(signal.SIGINT)
            spy.wait(60)
        cpu = server.close()
    print(f"{args.workload}: nsqd cpu {cpu:.2f} s, wall {elapsed:.2f} s")
    if spy is not None:
        summarise(out, args.top)
        print(f"raw profile: {out}")


if __name__ == "__main__":
    main()
