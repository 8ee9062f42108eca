"""Two figures of nsqd's HTTP side, ours and Go's side by side (issue 16's memory goal):

- idle: VmHWM (peak resident memory) of a freshly started nsqd once ``/ping`` answered,
  median over ``--runs`` starts;
- pub: ``POST /pub`` requests per second from one keep-alive client that waits for each
  answer (a raw socket, so the client costs little), ``--requests`` per run, bounded by
  ``--seconds``, median over ``--runs``.

Prints figures, asserts nothing.

    .venv/bin/python bench/http_footprint.py
    .venv/bin/python bench/http_footprint.py --runs 5 --requests 20000
"""
from __future__ import annotations

import argparse
import socket
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
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


def pub_rate(command: str, requests: int, seconds: float) -> float:
    server = Server(command, [])
    try:
        request = (f"POST /pub?topic=bench HTTP/1.1\r\nHost: {HOST}\r\nContent-Length: 200\r\n\r\n".encode()
                   + b"x" * 200)
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--requests", type=int, default=10000)
    parser.add_argument("--seconds", type=float, default=10.0)
    args = parser.parse_args()
    commands = {"ours": OURS}
    if reference_nsqd():
        commands["go"] = reference_nsqd()
    idle: dict[str, list[int]] = {name: [] for name in commands}
    rate: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(args.runs):
        for name, command in commands.items():  # alternated: both see the same machine
            idle[name].append(idle_peak(command))
            rate[name].append(pub_rate(command, args.requests, args.seconds))
    print(f"{'':>6} {'idle VmHWM':>12} {'POST /pub req/s':>16}   (medians of {args.runs})")
    for name in commands:
        print(f"{name:>6} {statistics.median(idle[name]) / 2**20:>9.1f} MiB {statistics.median(rate[name]):>16.0f}"
              f"   runs: {[round(v / 2**20, 1) for v in idle[name]]} MiB, {[round(v) for v in rate[name]]} req/s")


if __name__ == "__main__":
    main()
