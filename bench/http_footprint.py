"""Two figures of nsqd's HTTP side, ours and Go's side by side (issue 16's memory goal):

- idle: VmHWM (peak resident memory) of a freshly started nsqd once ``/ping`` answered,
  median over ``--runs`` starts;
- pub: ``POST /pub`` requests per second from one keep-alive client that waits for each
  answer (a raw socket, so the client costs little), ``--requests`` per run, bounded by
  ``--seconds``, median over ``--runs``;
- pub over N: the same over ``--connections`` keep-alive connections at once (default
  4), each sending its next request once its previous one was answered (one process,
  non-blocking sockets under epoll);
- mpub: messages per second through ``POST /mpub?binary=true``, 100 messages of 200 bytes
  per request, the same client, ``--requests`` / 10 requests per run.

``--previous`` adds another version of ours (a command, as in ``throughput.py``),
alternated with the others.

``--per-core``: each nsqd under ``taskset -c 0`` (Go with GOMAXPROCS=1), this client on
CPU 1 (bench/pinning.py).

Prints figures, asserts nothing.

    .venv/bin/python bench/http_footprint.py
    .venv/bin/python bench/http_footprint.py --runs 5 --requests 20000
    .venv/bin/python bench/http_footprint.py --previous "env PYTHONPATH=<tree>/broker:<tree>/protocol .venv/bin/python -m nsqd.cli"
"""
from __future__ import annotations

import argparse
import selectors
import socket
import statistics
import struct
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import pinning  # noqa: E402
from nsqd_proc import HOST, OURS, Server, reference_nsqd  # noqa: E402


def vm_hwm(pid: int) -> int:
    """Peak resident bytes of ``pid`` (Linux /proc)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM in /proc/<pid>/status")


def idle_peak(command: str) -> int:
    server = Server(command, [])
    try:
        return vm_hwm(server.proc.pid)
    finally:
        server.close()


def _content_length(head: bytes) -> int:
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return int(value)
    return 0


def _read_answer(sock: socket.socket, pending: bytearray) -> None:
    """Consume one 200 answer (headers, then Content-Length bytes of body) from the socket."""
    while True:
        end = pending.find(b"\r\n\r\n")
        if end >= 0:
            head = bytes(pending[:end])
            size = end + 4 + _content_length(head)
            if len(pending) >= size:
                if not head.startswith(b"HTTP/1.1 200"):
                    raise RuntimeError(f"unexpected answer: {bytes(pending[:size])!r}")
                del pending[:size]
                return
        chunk = sock.recv(65536)
        if not chunk:
            raise RuntimeError("nsqd closed the connection")
        pending += chunk


def _post_rate(command: str, request: bytes, requests: int, seconds: float) -> float:
    """Requests per second, each sent once the previous one was answered."""
    server = Server(command, [])
    try:
        with socket.create_connection((HOST, server.http)) as sock:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            pending = bytearray()
            sent = 0
            started = time.perf_counter()
            deadline = started + seconds
            while sent < requests and time.perf_counter() < deadline:
                sock.sendall(request)
                _read_answer(sock, pending)
                sent += 1
            return sent / (time.perf_counter() - started)
    finally:
        server.close()


def _answers_in(pending: bytearray) -> int:
    """How many complete 200 answers ``pending`` starts with; removes them."""
    count = 0
    while True:
        end = pending.find(b"\r\n\r\n")
        if end < 0:
            return count
        size = end + 4 + _content_length(bytes(pending[:end]))
        if len(pending) < size:
            return count
        if not pending.startswith(b"HTTP/1.1 200"):
            raise RuntimeError(f"unexpected answer: {bytes(pending[:size])!r}")
        del pending[:size]
        count += 1


def _post_rate_over(command: str, request: bytes, connections: int, requests: int, seconds: float) -> float:
    """Requests per second over ``connections`` keep-alive connections, each sending its
    next request once its previous one was answered."""
    server = Server(command, [])
    selector = selectors.EpollSelector()
    socks: list[socket.socket] = []
    try:
        for _ in range(connections):
            sock = socket.create_connection((HOST, server.http))
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            socks.append(sock)
        started = time.perf_counter()
        deadline = started + seconds
        for sock in socks:
            sock.sendall(request)
            sock.setblocking(False)
            selector.register(sock, selectors.EVENT_READ, bytearray())
        sent, answered = connections, 0
        while answered < sent and time.perf_counter() < deadline:
            for key, _ in selector.select(1.0):
                chunk = key.fileobj.recv(65536)
                if not chunk:
                    raise RuntimeError("nsqd closed the connection")
                key.data.extend(chunk)
                for _ in range(_answers_in(key.data)):
                    answered += 1
                    if sent < requests:
                        key.fileobj.send(request)  # small: the socket buffer takes it whole
                        sent += 1
        return answered / (time.perf_counter() - started)
    finally:
        selector.close()
        for sock in socks:
            sock.close()
        server.close()


def _post(path: str, body: bytes) -> bytes:
    return f"POST {path} HTTP/1.1\r\nHost: {HOST}\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body


def pub_rate(command: str, requests: int, seconds: float) -> float:
    return _post_rate(command, _post("/pub?topic=bench", b"x" * 200), requests, seconds)


def pub_rate_over(command: str, connections: int, requests: int, seconds: float) -> float:
    return _post_rate_over(command, _post("/pub?topic=bench", b"x" * 200), connections, requests, seconds)


MPUB_BATCH = 100


def mpub_rate(command: str, requests: int, seconds: float) -> float:
    """Messages per second."""
    body = struct.pack(">I", MPUB_BATCH) + (struct.pack(">I", 200) + b"x" * 200) * MPUB_BATCH
    request = _post("/mpub?topic=bench&binary=true", body)
    return MPUB_BATCH * _post_rate(command, request, max(1, requests // 10), seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--requests", type=int, default=10000)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--connections", type=int, default=4, help="of the /pub row over several connections")
    parser.add_argument("--previous", default="", help="command of another nsqd to alternate with")
    pinning.add_argument(parser)
    args = parser.parse_args()
    pinning.apply(args.per_core)
    commands = {"ours": OURS}
    if reference_nsqd():
        commands["go"] = reference_nsqd()
    if args.previous:
        commands["prev"] = args.previous
    idle: dict[str, list[int]] = {name: [] for name in commands}
    rate: dict[str, list[float]] = {name: [] for name in commands}
    mpub: dict[str, list[float]] = {name: [] for name in commands}
    over: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(args.runs):
        for name, command in commands.items():  # alternated: all see the same machine
            idle[name].append(idle_peak(command))
            rate[name].append(pub_rate(command, args.requests, args.seconds))
            mpub[name].append(mpub_rate(command, args.requests, args.seconds))
            over[name].append(pub_rate_over(command, args.connections, args.requests, args.seconds))
    over_title = f"/pub x{args.connections} req/s"
    print(f"{'':>6} {'idle VmHWM':>12} {'POST /pub req/s':>16} {over_title:>18} {'POST /mpub msgs/s':>18}"
          f"   (medians of {args.runs})")
    for name in commands:
        print(f"{name:>6} {statistics.median(idle[name]) / 2**20:>9.1f} MiB {statistics.median(rate[name]):>16.0f}"
              f" {statistics.median(over[name]):>18.0f} {statistics.median(mpub[name]):>18.0f}"
              f"   runs: {[round(v / 2**20, 1) for v in idle[name]]} MiB, {[round(v) for v in rate[name]]} req/s,"
              f" {[round(v) for v in over[name]]} req/s, {[round(v) for v in mpub[name]]} msgs/s")


if __name__ == "__main__":
    main()
