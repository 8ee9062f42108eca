"""nsqd as its work grows, ours beside Go's v1.3.0 (issue 27): prints figures and ratios,
asserts nothing.

    .venv/bin/python bench/scale.py [--runs 3] [--only restart,consumers,fanout,latency] [--per-core]
    NSQD_REF=/path/to/nsqd .venv/bin/python bench/scale.py   # another reference than ../shared

Rows (each run alternates ours and Go; a figure is the median of the runs):

- restart_N: a data path of N topics x 2 channels (one message on disk per topic), as a
  clean stop leaves it: seconds until loaded (Go's first /ping 200, our /ready 200), until
  the first HTTP answer, RSS once loaded, and SIGTERM to exit.
- consumers_K: 10 channels of one topic, K consumers spread over them with RDY 1, 10,000
  messages published by MPUB: seconds until all 100,000 deliveries were FINed, and the
  server's CPU per delivery over that span, user and system (bench/fleet.py, one
  process, one epoll; the 2000 connections' set-up not counted).
- fanout_C: one topic, C channels, each read by Go's bench_reader (RDY 200), while Go's
  bench_writer publishes MPUB of 100 for --seconds: deliveries/s summed over the channels
  and publishes/s into the topic.
- latency_R: PUB at R msgs/s for --seconds (each sent when due, stamped with its send
  time), one consumer with RDY 100: p50/p99/p99.9 from send to arrival. Go twice: with its
  default 250 ms output buffering and with buffering off (IDENTIFY output_buffer_size -1).
"""
from __future__ import annotations

import argparse
import datetime
import multiprocessing as mp
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fleet  # noqa: E402
import pinning  # noqa: E402
from nsqd_proc import OURS, Server, go_tool, reference_nsqd  # noqa: E402
from restart import restart, write_data_path  # noqa: E402

Figures = dict[str, float]
POOL: "mp.pool.Pool | None" = None  # made in main, after pinning
LOWER, HIGHER = "lower", "higher"


def restart_row(topics: int) -> Callable[[str], Figures]:
    def run(command: str) -> Figures:
        with tempfile.TemporaryDirectory(prefix="nsq-restart-") as tmp:
            write_data_path(Path(tmp), topics)
            r = restart(shlex.split(command), Path(tmp))
        return {"loaded s": r.loaded_s, "first answer s": r.first_answer_s, "RSS MiB": r.rss_mib,
                "stop s": r.stop_s}
    return run


def consumers_row(count: int) -> Callable[[str], Figures]:
    def run(command: str) -> Figures:
        server = Server(command, [])
        try:
            result = POOL.apply(fleet.consumers, (server.address, "fleet", [f"c{i}" for i in range(10)],
                                                  count, 10_000), {"server_pid": server.proc.pid})
        finally:
            server.close()
        per_delivery = 1e6 / result["deliveries"]
        user, system = result["server user s"] * per_delivery, result["server system s"] * per_delivery
        return {"seconds": result["seconds"], "cpu us/delivery": user + system,
                "user us/delivery": user, "system us/delivery": system}
    return run


_OPS = re.compile(rb"([0-9.]+)ops/s")


def go_tools_deadline(seconds: float = 2.0) -> str:
    """A ``-deadline`` for Go's bench tools ``seconds`` from now: tools started together
    begin their timed run on the same second."""
    return (datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=seconds)
            ).strftime("%Y-%m-%d %H:%M:%S")


def fanout_row(channels: int, seconds: float) -> Callable[[str], Figures]:
    writer, reader = go_tool("bench_writer"), go_tool("bench_reader")

    def run(command: str) -> Figures:
        server = Server(command, [])
        try:
            server.post("/topic/create?topic=fanout")
            for c in range(channels):
                server.post(f"/channel/create?topic=fanout&channel=c{c}")
            deadline = go_tools_deadline()
            common = [f"-nsqd-tcp-address={server.address}", "-topic=fanout", f"-runfor={seconds}s",
                      f"-deadline={deadline}"]
            cpu0 = server.cpu_seconds()
            readers = [subprocess.Popen([reader, *common, f"-channel=c{c}", "-rdy=200"],
                                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT) for c in range(channels)]
            publisher = subprocess.run([writer, *common, "-batch-size=100"], capture_output=True,
                                       timeout=seconds + 120)
            delivered = sum(_ops(r.communicate(timeout=seconds + 120)[0]) for r in readers)
            cpu = server.cpu_seconds() - cpu0
        finally:
            server.close()
        return {"deliveries/s": delivered, "publishes/s": _ops(publisher.stdout + publisher.stderr),
                "cpu s": cpu}
    return run


def _ops(output: bytes) -> float:
    match = _OPS.search(output)
    if match is None:
        raise RuntimeError(f"no ops/s in {output!r}")
    return float(match.group(1))


def latency_row(rate: float, seconds: float, identify: dict | None = None) -> Callable[[str], Figures]:
    def run(command: str) -> Figures:
        server = Server(command, [])
        try:
            messages = int(rate * seconds)
            consumer, buf = fleet.subscribe_latency_consumer(server.address, "latency", identify)
            publisher = POOL.apply_async(fleet.stamped_publisher, (server.address, "latency", rate, messages))
            latencies = sorted(fleet.time_deliveries(consumer, buf, messages))
            publisher.get()
        finally:
            server.close()
        pick = lambda q: latencies[min(len(latencies) - 1, int(q * len(latencies)))] / 1e6  # noqa: E731
        return {"p50 ms": pick(0.5), "p99 ms": pick(0.99), "p99.9 ms": pick(0.999)}
    return run


BETTER = {"loaded s": LOWER, "first answer s": LOWER, "RSS MiB": LOWER, "stop s": LOWER, "seconds": LOWER,
          "cpu us/delivery": LOWER, "user us/delivery": LOWER, "system us/delivery": LOWER, "deliveries/s": HIGHER, "publishes/s": HIGHER, "cpu s": LOWER,
          "p50 ms": LOWER, "p99 ms": LOWER, "p99.9 ms": LOWER}


def rows(args: argparse.Namespace) -> list[tuple[str, str, Callable[[str], Figures], list[tuple[str, Callable[[str], Figures]]]]]:
    """(group, name, our run, [(reference label, reference run)])."""
    out = []
    for n in (100, 1000, 5000):
        out.append(("restart", f"restart_{n}", restart_row(n), [("go", restart_row(n))]))
    for k in (1000, 2000, 5000):
        out.append(("consumers", f"consumers_{k}", consumers_row(k), [("go", consumers_row(k))]))
    for c in (1, 10, 50):
        out.append(("fanout", f"fanout_{c}", fanout_row(c, args.seconds), [("go", fanout_row(c, args.seconds))]))
    for rate in (1000, 10000):
        out.append(("latency", f"latency_{rate // 1000}k", latency_row(rate, args.seconds),
                    [("go", latency_row(rate, args.seconds)),
                     ("go-unbuf", latency_row(rate, args.seconds, {"output_buffer_size": -1}))]))
    return [r for r in out if not args.only or r[0] in args.only.split(",") or r[1] in args.only.split(",")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=5.0, help="length of the fanout and latency runs")
    parser.add_argument("--only", default="", help="comma-separated groups or rows")
    pinning.add_argument(parser)
    args = parser.parse_args()
    pinning.apply(args.per_core)
    global POOL
    POOL = mp.Pool(1)
    ref = reference_nsqd()
    if not ref:
        sys.exit("no Go nsqd: set NSQD_REF or put NSQ v1.3.0 in ../shared/nsq-v1.3.0")
    print(f"{'row':<16}{'figure':<18}{'ours':>10}{'ref':>10}{'ours/ref':>10}  ref", flush=True)
    for _, name, ours, refs in rows(args):
        results: dict[str, list[Figures]] = {"ours": []}
        for _ in range(args.runs):  # alternated, so both see the same machine
            results["ours"].append(ours(OURS))
            for label, run in refs:
                results.setdefault(label, []).append(run(ref))
        medians = {label: {k: statistics.median(r[k] for r in runs) for k in runs[0]}
                   for label, runs in results.items()}
        for label, _ in refs:
            for key, value in medians["ours"].items():
                other = medians[label][key]
                ratio = value / other if other else float("nan")
                print(f"{name:<16}{key:<18}{value:>10.3g}{other:>10.3g}{ratio:>10.2f}  {label} ({BETTER[key]} is better)",
                      flush=True)


if __name__ == "__main__":
    mp.set_start_method("spawn")
    try:
        main()
    finally:
        if POOL is not None:
            POOL.terminate()
