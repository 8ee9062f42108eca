"""The cost of replicated topics: publish throughput and latency with replication off,
2 and 3 replicas (3 nsqd processes, publishes to the first), against Go's nsqd and ours
unreplicated. Prints figures, asserts nothing.

    .venv/bin/python bench/replication.py [--runs 3] [--scale 1.0] [--only pub_8,pub_32,mpub_200,mpub_200_fin]
    .venv/bin/python bench/replication.py --flags=--sync-before-ack   # durable mode everywhere but Go
    sudo .venv/bin/python bench/replication.py --node-cpu 0.5         # each nsqd limited as a pod to 500m

Every nsqd of a row runs on this machine, so a replicated row's backups take CPU from
the owner (on 2 cores, 3 nsqds and the load generator share them): the CPU columns,
microseconds of CPU per message in the owner and in its backups together, tell what
the rate would be with a machine per nsqd. ``--node-cpu`` gives each nsqd (Go's too) a
cgroup CPU quota of its own, what kubelet gives a pod with that CPU limit, so that each
gets what a node of that size would give it and the rates compare nodes of equal size
(the load generator is not limited; loopback's receive work is still counted on the
sending nsqd). Each run starts fresh processes; a row is the median of the runs.
"""
from __future__ import annotations

import argparse
import multiprocessing as mp
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import loadgen  # noqa: E402
from durability import fmt, median, ready, run_concurrent_pubs  # noqa: E402
from nsqd_proc import HOST, OURS, Server, free_port, reference_nsqd  # noqa: E402

WORKLOADS = {
    # name: (what, base message count)
    "pub_8": ("PUB, 8 connections, one at a time each (p50/p99 round trip)", 20_000),
    "pub_32": ("PUB, 32 connections, one at a time each (p50/p99 round trip)", 60_000),
    "mpub_200": ("MPUB of 200, 1 connection, 8 batches in flight", 200_000),
    "mpub_200_fin": ("mpub_200 with a consumer finishing each message meanwhile (RDY 1000): "
                     "publish rate, CPU per message published and finished", 200_000),
    "pub_latency_10k": ("PUB at 10k msgs/s on one connection, sent when due: p50/p99 send to OK", 30_000),
}

SETUPS = ["go", "ours", "ours_r2", "ours_r3"]


def start(setup: str, flags: list[str], node_cpu: float | None = None) -> list[Server]:
    if setup == "go":
        return [Server(reference_nsqd(), [], node_cpu)]
    if setup == "ours":
        return [Server(OURS, flags, node_cpu)]
    replicas = int(setup[-1])
    peers = [f"{HOST}:{free_port()}" for _ in range(3)]
    common = [f"--replication-peer={','.join(peers)}", f"--topic-replicas={replicas}", *flags]
    servers: list[Server] = []
    try:
        for peer in peers:
            servers.append(Server(OURS, [f"--replication-address={peer}", *common], node_cpu))
    except BaseException:
        for server in servers:
            server.close()
        raise
    return servers


def run_one(pool: "mp.pool.Pool", setup: str, name: str, scale: float, flags: list[str],
            node_cpu: float | None = None) -> dict:
    total = max(1000, int(WORKLOADS[name][1] * scale))
    servers = start(setup, flags, node_cpu)
    owner = servers[0]
    topic = f"bench-{name}"
    try:
        owner.post(f"/topic/create?topic={topic}")
        owner.post(f"/channel/create?topic={topic}&channel=sink")
        if len(servers) > 1:
            _wait_links(owner)
        if name in ("pub_8", "pub_32"):
            result = run_concurrent_pubs(pool, owner.address, topic, int(name[4:]), total)
        elif name == "mpub_200":
            result = pool.apply_async(loadgen.mpub, (owner.address, topic, total, 200, 8)).get()
        elif name == "mpub_200_fin":
            consumed = pool.apply_async(loadgen.consume, (owner.address, topic, "sink", total, 1000))
            result = pool.apply_async(loadgen.mpub, (owner.address, topic, total, 200, 8)).get()
            consumed.get()
        elif name == "pub_latency_10k":
            result = pool.apply_async(loadgen.pub_paced, (owner.address, topic, total, 10000.0)).get()
        else:
            raise ValueError(name)
    finally:
        cpu = [server.close() for server in servers]
    latencies = sorted(result.get("latencies", []))
    pick = (lambda q: latencies[min(len(latencies) - 1, int(q * len(latencies)))] * 1000) if latencies else None
    count = result["messages"]
    return {"rate": count / result["seconds"], "owner_us": cpu[0] / count * 1e6,
            "backups_us": sum(cpu[1:]) / count * 1e6 if len(cpu) > 1 else None,
            "p50": pick(0.5) if pick else None, "p99": pick(0.99) if pick else None}


def _wait_links(owner: Server) -> None:
    import json
    import urllib.request
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        with urllib.request.urlopen(f"http://{HOST}:{owner.http}/replication", timeout=5) as resp:
            if all(b["connected"] for b in json.load(resp)["backups"]):
                return
        time.sleep(0.05)
    raise RuntimeError("the owner's backups did not connect")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--scale", type=float, default=1.0, help="multiply every message count")
    parser.add_argument("--only", default="", help="comma-separated workloads")
    parser.add_argument("--flags", default="", help="extra flags for our nsqds, comma-separated")
    parser.add_argument("--node-cpu", type=float, default=None,
                        help="CPUs each nsqd may use (a cgroup quota, as a pod's CPU limit; needs root)")
    args = parser.parse_args()
    flags = [f for f in args.flags.split(",") if f]
    names = [w for w in WORKLOADS if not args.only or w in args.only.split(",")]
    setups = [s for s in SETUPS if s != "go" or reference_nsqd()]
    if args.node_cpu:
        print(f"each nsqd limited to {args.node_cpu:g} CPU (cgroup quota), the load generator not")
    print(f"{'workload':<17}{'setup':<9}{'msgs/s':>10}{'vs ours':>9}{'p50 ms':>9}{'p99 ms':>9}"
          f"{'owner us/msg':>14}{'backups us/msg':>16}   what")
    with mp.get_context("spawn").Pool(8) as pool:
        pool.map(ready, range(64))
        for name in names:
            rows = {setup: [run_one(pool, setup, name, args.scale, flags, args.node_cpu) for _ in range(args.runs)]
                    for setup in setups}
            base = median(rows["ours"], "rate")
            for setup in setups:
                rate = median(rows[setup], "rate")
                assert rate is not None and base is not None
                r = rows[setup]
                print(f"{name:<17}{setup:<9}{rate:>10.0f}{rate / base:>9.2f}{fmt(median(r, 'p50'), '.2f'):>9}"
                      f"{fmt(median(r, 'p99'), '.2f'):>9}{fmt(median(r, 'owner_us'), '.1f'):>14}"
                      f"{fmt(median(r, 'backups_us'), '.1f'):>16}   {WORKLOADS[name][0] if setup == setups[0] else ''}",
                      flush=True)


if __name__ == "__main__":
    main()
