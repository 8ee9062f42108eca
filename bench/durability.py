"""Publish throughput of nsqd in default mode and in durable mode (--sync-before-ack),
side by side. Prints figures, asserts nothing.

    .venv/bin/python bench/durability.py [--runs 3] [--scale 1.0] [--only pub_32,mpub_200]

In durable mode every OK means "fsynced"; concurrent publishers share each fsync round
(group commit), so throughput grows with the number of connections waiting at once. The
load generators run in processes separate from nsqd (blocking sockets; a process drives
several connections with one thread each), against a fresh nsqd per run; a row is the
median of the runs. Every run has one channel on the topic, so durable mode writes each
message to that channel's disk queue.
"""
from __future__ import annotations

import argparse
import multiprocessing as mp
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import loadgen  # noqa: E402
from run import OURS, Server  # noqa: E402

from nsq_protocol import commands  # noqa: E402

CONNECTIONS_PER_PROCESS = 8


def pub_connections(address: str, topic: str, per_connection: int, connections: int, first: int) -> dict:
    """``connections`` threads, each PUBs one message at a time and waits for its OK."""
    latencies: list[float] = []
    lock = threading.Lock()

    def one(number: int) -> None:
        sock = loadgen.connect(address)
        reader = loadgen.Reader(sock)
        mine = []
        for i in range(per_connection):
            t0 = time.perf_counter()
            sock.sendall(commands.pub(topic, loadgen.body((first + number) * per_connection + i)))
            reader.expect_responses(1)
            mine.append(time.perf_counter() - t0)
        sock.close()
        with lock:
            latencies.extend(mine)

    threads = [threading.Thread(target=one, args=(n,)) for n in range(connections)]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return {"messages": per_connection * connections, "seconds": time.perf_counter() - start,
            "latencies": latencies}


def run_concurrent_pubs(pool: "mp.pool.Pool", address: str, topic: str, connections: int, total: int) -> dict:
    per_connection = max(1, total // connections)
    groups = [min(CONNECTIONS_PER_PROCESS, connections - start)
              for start in range(0, connections, CONNECTIONS_PER_PROCESS)]
    start = time.perf_counter()
    jobs = [pool.apply_async(pub_connections, (address, topic, per_connection, size, i * CONNECTIONS_PER_PROCESS))
            for i, size in enumerate(groups)]
    results = [job.get() for job in jobs]
    return {"messages": sum(r["messages"] for r in results), "seconds": time.perf_counter() - start,
            "latencies": [x for r in results for x in r["latencies"]]}


WORKLOADS = {
    # name: (what, base message count)
    "pub_1": ("PUB, 1 connection, one at a time", 4_000),
    "pub_8": ("PUB, 8 connections, one at a time each", 20_000),
    "pub_32": ("PUB, 32 connections, one at a time each", 40_000),
    "mpub_200": ("MPUB of 200, 1 connection", 200_000),
    "mpub_200_x4": ("MPUB of 200, 4 connections", 400_000),
    "http_mpub": ("HTTP /mpub of 200, 1 connection", 100_000),
}


def run_one(pool: "mp.pool.Pool", name: str, durable: bool, scale: float) -> dict:
    total = max(200, int(WORKLOADS[name][1] * scale))
    flags = ["--sync-before-ack"] if durable else []
    server = Server(OURS, flags)
    topic = f"bench-{name}"
    try:
        server.post(f"/topic/create?topic={topic}")
        server.post(f"/channel/create?topic={topic}&channel=sink")
        if name.startswith("pub_"):
            result = run_concurrent_pubs(pool, server.address, topic, int(name[4:]), total)
        elif name == "mpub_200":
            result = pool.apply_async(loadgen.mpub, (server.address, topic, total, 200, 1)).get()
        elif name == "mpub_200_x4":
            start = time.perf_counter()
            jobs = [pool.apply_async(loadgen.mpub, (server.address, topic, total // 4, 200, 1)) for _ in range(4)]
            count = sum(job.get()["messages"] for job in jobs)
            result = {"messages": count, "seconds": time.perf_counter() - start}
        elif name == "http_mpub":
            result = pool.apply_async(http_mpub, (server.http, topic, total, 200)).get()
        else:
            raise ValueError(name)
    finally:
        server.close()
    latencies = sorted(result.get("latencies", []))
    pick = (lambda q: latencies[min(len(latencies) - 1, int(q * len(latencies)))] * 1000) if latencies else None
    return {"rate": result["messages"] / result["seconds"],
            "p50": pick(0.5) if pick else None, "p99": pick(0.99) if pick else None}


def http_mpub(http_port: int, topic: str, count: int, batch: int) -> dict:
    import http.client
    conn = http.client.HTTPConnection("127.0.0.1", http_port, timeout=60)
    start = time.perf_counter()
    sent = 0
    while sent < count:
        body = commands.encode_mpub_body([loadgen.body(sent + i) for i in range(batch)])
        conn.request("POST", f"/mpub?topic={topic}&binary=true", body)
        response = conn.getresponse()
        response.read()
        if response.status != 200:
            raise RuntimeError(f"/mpub answered {response.status}")
        sent += batch
    conn.close()
    return {"messages": sent, "seconds": time.perf_counter() - start}


def ready(_: int) -> int:
    return 0


def median(rows: list[dict], key: str) -> float | None:
    values = [r[key] for r in rows]
    return None if any(v is None for v in values) else statistics.median(values)


def fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--scale", type=float, default=1.0, help="multiply every message count")
    parser.add_argument("--only", default="", help="comma-separated workloads")
    args = parser.parse_args()
    names = [w for w in WORKLOADS if not args.only or w in args.only.split(",")]
    print(f"{'workload':<13}{'default msgs/s':>15}{'durable msgs/s':>15}{'durable/default':>16}"
          f"{'p50 ms (def/dur)':>19}{'p99 ms (def/dur)':>19}   what")
    with mp.get_context("spawn").Pool(8) as pool:
        pool.map(ready, range(64))  # every worker started and imported before any timing
        for name in names:
            default = [run_one(pool, name, False, args.scale) for _ in range(args.runs)]
            durable = [run_one(pool, name, True, args.scale) for _ in range(args.runs)]
            d_rate, s_rate = median(default, "rate"), median(durable, "rate")
            assert d_rate is not None and s_rate is not None
            p50 = f"{fmt(median(default, 'p50'), '.2f')}/{fmt(median(durable, 'p50'), '.2f')}"
            p99 = f"{fmt(median(default, 'p99'), '.2f')}/{fmt(median(durable, 'p99'), '.2f')}"
            print(f"{name:<13}{d_rate:>15.0f}{s_rate:>15.0f}{s_rate / d_rate:>16.2f}{p50:>19}{p99:>19}"
                  f"   {WORKLOADS[name][0]}", flush=True)


if __name__ == "__main__":
    main()
