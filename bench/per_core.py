"""Issue 34's table in one command: every row of throughput.py, scale.py and
http_footprint.py that the issue compares, ours beside Go's nsqd v1.3.0 (and
``--previous``, another tree of ours), alternated within each row, medians of --runs.
Prints figures, asserts nothing.

    .venv/bin/python bench/per_core.py --per-core            # each nsqd on CPU 0, load on CPU 1
    .venv/bin/python bench/per_core.py                       # unpinned
    .venv/bin/python bench/per_core.py --per-core --only consumers_2000,http_pub_1 --runs 5
    .venv/bin/python bench/per_core.py --per-core --previous "env PYTHONPATH=<tree>/broker:<tree>/protocol .venv/bin/python -m nsqd.cli"

A row's ratio is ours over Go as a speed (for the consumers row, which times a fixed
amount of work, Go's seconds over ours), so above 1.0 is ahead of Go either way; each
server's runs follow. nsqd's CPU per unit of work is in the scripts behind the rows
(``scale.py --only consumers_2000`` for the consumers row, ``cpu_per_work.py``).

| row | what |
|---|---|
| bench_reader, bench_writer_200, bench_writer_1, mpub_100, pub_pipelined, consume | throughput.py's rows (msgs/s) |
| fanout_10 | scale.py: bench_writer MPUB 100 into 10 channels, a bench_reader each (deliveries/s) |
| consumers_2000 | scale.py: 10k messages over 2000 consumers with RDY 1 on 10 channels (seconds) |
| http_pub_1, http_pub_4 | http_footprint.py: POST /pub one at a time on 1 / 4 keep-alive connections (req/s) |
| http_mpub | http_footprint.py: POST /mpub of 100 x 200 bytes, one at a time (msgs/s) |
"""
from __future__ import annotations

import argparse
import multiprocessing as mp
import statistics
import sys
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))
import http_footprint  # noqa: E402
import pinning  # noqa: E402
import run  # noqa: E402
import scale  # noqa: E402
import throughput  # noqa: E402
from nsqd_proc import OURS, reference_nsqd  # noqa: E402

Row = Callable[[str], float]
HTTP_REQUESTS, HTTP_SECONDS = 20000, 5.0


def _throughput(name: str, seconds: float) -> Row:
    if name in throughput.PYTHON_ROWS:
        return lambda command: throughput.python_row(name, command, 1.0).rate
    return lambda command: throughput.go_row(name, command, seconds).rate


def rows(seconds: float) -> dict[str, tuple[Row, bool]]:
    """name -> (run returning the figure, whether higher is better)."""
    out: dict[str, tuple[Row, bool]] = {name: (_throughput(name, seconds), True) for name in throughput.ROWS}
    fanout = scale.fanout_row(10, seconds)
    out["fanout_10"] = (lambda command: fanout(command)["deliveries/s"], True)
    consumers = scale.consumers_row(2000)
    out["consumers_2000"] = (lambda command: consumers(command)["seconds"], False)
    out["http_pub_1"] = (lambda command: http_footprint.pub_rate(command, HTTP_REQUESTS, seconds), True)
    out["http_pub_4"] = (lambda command: http_footprint.pub_rate_over(command, 4, HTTP_REQUESTS, seconds), True)
    out["http_mpub"] = (lambda command: http_footprint.mpub_rate(command, HTTP_REQUESTS, seconds), True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=5.0, help="length of the timed rows")
    parser.add_argument("--only", default="", help="comma-separated rows")
    parser.add_argument("--previous", default="", help="command of a third nsqd to alternate with")
    pinning.add_argument(parser)
    args = parser.parse_args()
    pinning.apply(args.per_core)
    run.POOL = scale.POOL = mp.Pool(4)
    ref = reference_nsqd()
    if not ref:
        sys.exit("no Go nsqd: set NSQD_REF or put NSQ v1.3.0 in ../shared/nsq-v1.3.0")
    servers = [("ours", OURS), ("go", ref)] + ([("prev", args.previous)] if args.previous else [])
    table = rows(args.seconds)
    names = [n for n in table if not args.only or n in args.only.split(",")]
    mode = "per core (nsqd on CPU 0, load on CPU 1)" if args.per_core else "unpinned"
    extra = f"{'prev':>12}{'ours/prev':>10}" if args.previous else ""
    print(f"{mode}, medians of {args.runs}\n{'row':<18}{'ours':>12}{'Go':>12}{'ours/Go':>9}{extra}", flush=True)
    for name in names:
        measure, higher_better = table[name]
        figures: dict[str, list[float]] = {label: [] for label, _ in servers}
        for _ in range(args.runs):
            for label, command in servers:  # alternated, so all see the same machine
                figures[label].append(measure(command))
        med = {label: statistics.median(values) for label, values in figures.items()}
        speed = (lambda a, b: a / b) if higher_better else (lambda a, b: b / a)
        line = f"{name:<18}{med['ours']:>12.4g}{med['go']:>12.4g}{speed(med['ours'], med['go']):>9.2f}"
        if "prev" in med:
            line += f"{med['prev']:>12.4g}{speed(med['ours'], med['prev']):>10.2f}"
        print(line + f"   runs ours {[round(v, 3) for v in figures['ours']]} go {[round(v, 3) for v in figures['go']]}",
              flush=True)


if __name__ == "__main__":
    mp.set_start_method("spawn")
    try:
        main()
    finally:
        if run.POOL is not None:
            run.POOL.terminate()
