"""Per-core mode of the benchmarks (issue 34): every nsqd on one CPU, the load generators
on the other, so a row compares what one core of each server carries.

``apply(True)`` pins this process (and so every load generator it starts afterwards:
pool workers, Go's bench tools) to ``LOAD_CPU``; servers started through
``server_argv``/``server_env`` then run under ``taskset -c SERVER_CPU`` with
``GOMAXPROCS=1`` (Go's runtime would pick 1 from the affinity too; set so it is explicit).
Call it before any pool of load generators is made."""
from __future__ import annotations

import argparse
import os

SERVER_CPU = 0
LOAD_CPU = 1
_pinned = False


def add_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--per-core", action="store_true",
                        help=f"servers under taskset -c {SERVER_CPU} (Go with GOMAXPROCS=1), "
                             f"load generators on CPU {LOAD_CPU}")


def apply(per_core: bool) -> None:
    global _pinned
    _pinned = per_core
    if per_core:
        if len(os.sched_getaffinity(0)) < 2:
            raise SystemExit("--per-core needs two CPUs")
        os.sched_setaffinity(0, {LOAD_CPU})


def pinned() -> bool:
    return _pinned


def server_argv(argv: list[str]) -> list[str]:
    return ["taskset", "-c", str(SERVER_CPU), *argv] if _pinned else argv


def server_env() -> dict[str, str] | None:
    return {**os.environ, "GOMAXPROCS": "1"} if _pinned else None
