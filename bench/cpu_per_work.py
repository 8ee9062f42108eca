"""nsqd's CPU seconds (user + system, from /proc) per unit of fixed work, ours beside Go's
nsqd v1.3.0 (and ``--previous``), alternated, medians of ``--runs``. On a machine shared
with other work a rate swings by 2x from run to run, as the load generator and the server
wait for CPU; the CPU a server spends on a fixed amount of work moves far less, and it is
what one core of each server costs per request. Prints figures, asserts nothing.

| row | work | unit |
|---|---|---|
| http_pub_1 | 10000 POST /pub of 200 bytes, one keep-alive connection, one at a time | us per request |
| http_pub_4 | 20000 POST /pub over 4 keep-alive connections, each one at a time | us per request |
| http_mpub | 1000 POST /mpub?binary=true of 100 x 200 bytes, one at a time | us per message |
| mpub_100 | 300000 messages in TCP MPUBs of 100 x 200 bytes, 8 in flight (loadgen.mpub) | us per message |

Servers run with ``--mem-queue-size=1000000`` (nothing goes to disk).

    .venv/bin/python bench/cpu_per_work.py --per-core --runs 5
    NSQD_OURS="env PYTHONPATH=<tree>/broker:<tree>/protocol .venv/bin/python -m nsqd.cli" \\
      .venv/bin/python bench/cpu_per_work.py --per-core --previous "env PYTHONPATH=<main>/broker:<main>/protocol .venv/bin/python -m nsqd.cli"
"""
from __future__ import annotations

import argparse
import selectors
import socket
import statistics
import struct
import sys
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))
import http_footprint as hf  # noqa: E402
import loadgen  # noqa: E402
import pinning  # noqa: E402
from nsqd_proc import HOST, OURS, Server, reference_nsqd  # noqa: E402

FLAGS = ["--mem-queue-size=1000000"]
PUB = hf._post("/pub?topic=bench", b"x" * 200)
MPUB = hf._post("/mpub?topic=bench&binary=true",
                struct.pack(">I", 100) + (struct.pack(">I", 200) + b"x" * 200) * 100)


def _one_at_a_time(server: Server, request: bytes, count: int) -> None:
    with socket.create_connection((HOST, server.http)) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        pending = bytearray()
        for _ in range(count):
            sock.sendall(request)
            hf._read_answer(sock, pending)


def http_pub_1(server: Server) -> int:
    _one_at_a_time(server, PUB, 10000)
    return 10000


def http_pub_4(server: Server, count: int = 20000, connections: int = 4) -> int:
    selector = selectors.EpollSelector()
    socks = [socket.create_connection((HOST, server.http)) for _ in range(connections)]
    try:
        for sock in socks:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.sendall(PUB)
            sock.setblocking(False)
            selector.register(sock, selectors.EVENT_READ, bytearray())
        sent, answered = connections, 0
        while answered < sent:
            for key, _ in selector.select(5.0):
                chunk = key.fileobj.recv(65536)  # type: ignore[union-attr]
                if not chunk:
                    raise RuntimeError("nsqd closed the connection")
                key.data.extend(chunk)
                for _ in range(hf._answers_in(key.data)):
                    answered += 1
                    if sent < count:
                        key.fileobj.send(PUB)  # type: ignore[union-attr]
                        sent += 1
    finally:
        selector.close()
        for sock in socks:
            sock.close()
    return count


def http_mpub(server: Server) -> int:
    _one_at_a_time(server, MPUB, 1000)
    return 1000 * 100


def mpub_100(server: Server) -> int:
    return loadgen.mpub(server.address, "bench", 300000, 100)["messages"]


ROWS: dict[str, Callable[[Server], int]] = {
    "http_pub_1": http_pub_1, "http_pub_4": http_pub_4, "http_mpub": http_mpub, "mpub_100": mpub_100}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--only", default="", help="comma-separated rows")
    parser.add_argument("--previous", default="", help="command of a third nsqd to alternate with")
    pinning.add_argument(parser)
    args = parser.parse_args()
    pinning.apply(args.per_core)
    ref = reference_nsqd()
    if not ref:
        sys.exit("no Go nsqd: set NSQD_REF or put NSQ v1.3.0 in ../shared/nsq-v1.3.0")
    servers = [("ours", OURS), ("go", ref)] + ([("prev", args.previous)] if args.previous else [])
    extra = f"{'prev':>8}{'prev/ours':>10}" if args.previous else ""
    print(f"nsqd CPU us per unit, medians of {args.runs}{', per core' if args.per_core else ''}\n"
          f"{'row':<12}{'ours':>8}{'Go':>8}{'Go/ours':>9}{extra}", flush=True)
    for name, work in ROWS.items():
        if args.only and name not in args.only.split(","):
            continue
        cpu: dict[str, list[float]] = {label: [] for label, _ in servers}
        for _ in range(args.runs):
            for label, command in servers:  # alternated, so all see the same machine
                server = Server(command, FLAGS)
                try:
                    before = server.cpu_seconds()
                    units = work(server)
                    cpu[label].append((server.cpu_seconds() - before) / units * 1e6)
                finally:
                    server.close()
        med = {label: statistics.median(values) for label, values in cpu.items()}
        line = f"{name:<12}{med['ours']:>8.3g}{med['go']:>8.3g}{med['go'] / med['ours']:>9.2f}"
        if "prev" in med:
            line += f"{med['prev']:>8.3g}{med['prev'] / med['ours']:>10.2f}"
        print(line + "   runs " + " ".join(f"{label} {[round(v, 2) for v in values]}" for label, values in cpu.items()),
              flush=True)


if __name__ == "__main__":
    main()
