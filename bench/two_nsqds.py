"""The second core, the operator's way: two of our nsqds (two pods) against one Go nsqd
that spreads over both cores, under the same load, nothing pinned. Prints figures,
asserts nothing.

    .venv/bin/python bench/two_nsqds.py [--runs 3] [--seconds 5] [--only bench_writer_1,consumers]

Every row runs two load generators. For Go both go to its one nsqd; for ``ours x2`` each
goes to its own nsqd (as producers and consumers spread over pods behind lookupd); for
``ours x1`` both go to one of ours, the figure one process reaches with the same load.

| row | each of the two load generators |
|---|---|
| bench_writer_1 | Go's bench_writer, batch 1 (each publish waits for its OK), for --seconds |
| bench_writer_200 | Go's bench_writer, MPUB of 200, for --seconds |
| consumers | 1000 consumers with RDY 1 on 10 channels of a topic of its own, 10k messages (bench/fleet.py) |

Rates are the two generators' sum (for ``consumers``, deliveries over the slower one's
seconds); a ratio above 1.0 is ahead of Go.
"""
from __future__ import annotations

import argparse
import multiprocessing as mp
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fleet  # noqa: E402
from nsqd_proc import OURS, Server, go_tool, reference_nsqd  # noqa: E402
from scale import _ops, go_tools_deadline  # noqa: E402
from throughput import FLAGS  # noqa: E402

Load = Callable[[list[str], float], float]  # two nsqd addresses (maybe the same one) -> rate


def writers(batch: int) -> Load:
    def run(addresses: list[str], seconds: float) -> float:
        start = go_tools_deadline()
        procs = [subprocess.Popen([go_tool("bench_writer"), f"-nsqd-tcp-address={address}", f"-topic=w{i}",
                                   f"-runfor={seconds}s", f"-deadline={start}", f"-batch-size={batch}"],
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
                 for i, address in enumerate(addresses)]
        return sum(_ops(p.communicate(timeout=seconds + 120)[0]) for p in procs)
    return run


def consumers(pool: "mp.pool.Pool") -> Load:
    def run(addresses: list[str], seconds: float) -> float:
        jobs = [pool.apply_async(fleet.consumers, (address, f"fleet{i}", [f"c{c}" for c in range(10)], 1000, 10_000))
                for i, address in enumerate(addresses)]
        results = [job.get(timeout=600) for job in jobs]
        return sum(r["deliveries"] for r in results) / max(r["seconds"] for r in results)
    return run


def measure(load: Load, commands: list[str], seconds: float) -> float:
    """The load's rate with ``commands`` as the nsqds (one: both generators share it)."""
    servers = [Server(command, FLAGS) for command in commands]
    try:
        addresses = [s.address for s in servers]
        return load(addresses * (2 // len(addresses)), seconds)
    finally:
        for server in servers:
            server.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--only", default="")
    args = parser.parse_args()
    ref = reference_nsqd()
    if not ref:
        sys.exit("no Go nsqd: set NSQD_REF or put NSQ v1.3.0 in ../shared/nsq-v1.3.0")
    pool = mp.get_context("spawn").Pool(2)
    loads = {"bench_writer_1": writers(1), "bench_writer_200": writers(200), "consumers": consumers(pool)}
    setups = {"go": [ref], "ours x2": [OURS, OURS], "ours x1": [OURS]}
    print(f"unpinned, two load generators, medians of {args.runs}")
    print(f"{'row':<18}{'go':>12}{'ours x2':>12}{'ours x1':>12}{'x2/go':>8}{'x1/go':>8}", flush=True)
    try:
        for name, load in loads.items():
            if args.only and name not in args.only.split(","):
                continue
            figures: dict[str, list[float]] = {label: [] for label in setups}
            for _ in range(args.runs):
                for label, commands in setups.items():  # alternated, so all see the same machine
                    figures[label].append(measure(load, commands, args.seconds))
            med = {label: statistics.median(values) for label, values in figures.items()}
            print(f"{name:<18}{med['go']:>12.4g}{med['ours x2']:>12.4g}{med['ours x1']:>12.4g}"
                  f"{med['ours x2'] / med['go']:>8.2f}{med['ours x1'] / med['go']:>8.2f}   runs "
                  + " ".join(f"{label} {[round(v) for v in values]}" for label, values in figures.items()),
                  flush=True)
    finally:
        pool.terminate()


if __name__ == "__main__":
    main()
