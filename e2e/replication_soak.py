"""A longer soak of replicated topics, Jepsen-style, outside the test suite:

    .venv/bin/python e2e/replication_soak.py --minutes 10 [--replicas 3] [--wipe] [--membership] [--seed 7]

Three nsqds, each in its own network namespace (root, iproute2 and iptables needed),
3 replicas of topic ``soak``. Producers (our nsq_client Producer, one per nsqd) publish
at a bounded rate and record what was acknowledged; a consumer on every nsqd FINs what
it gets and reconnects when its nsqd comes back, except during half the faults, which
strike with the consumers away, so that the queues hold a backlog. Every few seconds one
fault, then its repair: kill -9 of a node (``--wipe``: its data directory deleted too)
and a restart (half the time at once, as kubelet restarts a crashed container, before
its peers miss it), or one node cut off from the others and healed, or (``--membership``) a new peer list (the
current one reversed, one epoch up) given to every nsqd live, as the operator gives it
when the number of nsqds changes, and again to a node restarted later. With 2 replicas
that moves every owner's copies to another backup while the faults go on. At the end
everything is healed and
restarted, the consumers drain, and the checker prints acknowledged, delivered, lost
(acknowledged and never delivered: must be 0) and duplicates. Exit status 1 on a loss.

``--wipe`` also makes every killed node come back empty: its owners' backups adopt what
it held, and it is caught up (a snapshot) as a backup of the others before its copies
count again. ``--memory`` runs the nsqds without ``--sync-before-ack``: a killed node
loses what its memory queues held, and its backups' copies must make up for it.

Two minutes, seed 21, ``--replicas 2 --wipe --membership`` (``make soak``): 32454
acknowledged, 0 lost, 597 duplicates. Three minutes, seed 5, durable: 49934
acknowledged, 0 lost, 5085 duplicates (a node killed while its consumers drain a backlog
delivers again what it read since its last sync, as NSQ's nsqd does, and FINs still on
their way to the backups come back with an adoption). Three minutes ``--memory``, seeds
5 to 8: 61761 to 71531 acknowledged, 0 lost in four runs of five, 2 lost in one (seed 5,
not seen in a second run of it; not explained yet); without the restart as another life
(``broker/nsqd/replication/run_marker.py``), seed 5 lost 1744.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import random
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from nsq_client import Producer  # noqa: E402
from tests.broker import netns  # noqa: E402
from tests.broker.load import Consumer, Disconnected  # noqa: E402
from tests.servers import http  # noqa: E402

TOPIC, CHANNEL = "soak", "checker"


class Soak:
    def __init__(self, root: Path, replicas: int, rate: float, seed: int, memory: bool = False) -> None:
        self.spaces = netns.Namespaces(3)
        self.peers = [f"{ip}:4153" for ip in self.spaces.ips]
        self.nodes = [netns.NetnsNsqd(root / f"nsqd{i}", {
            "replication-address": peer, "replication-peer": ",".join(self.peers),
            "topic-replicas": replicas, "replication-failover-timeout": "2s", "replication-timeout": "3s",
            **({} if memory else {"sync-before-ack": "true"})}, name, ip)
            for i, (name, ip, peer) in enumerate(zip(self.spaces.names, self.spaces.ips, self.peers))]
        self.rate = rate
        self.random = random.Random(seed)
        self.acked: set[bytes] = set()
        self.failed = 0
        self.delivered: Counter[bytes] = Counter()
        self.consumers: dict[int, Consumer] = {}
        self.stopping = False
        self.away = False  # the consumers stopped for a while
        self.order, self.epoch = list(self.peers), 0  # the peer list the nsqds are given

    def give_list(self, i: int) -> None:
        """As the operator does on each pass: the current list to a node that runs another."""
        if self.epoch:
            body = json.dumps({"epoch": self.epoch, "peers": self.order}).encode()
            status, answer = http("PUT", self.nodes[i].url("/replication/peers"), body)
            if status != 200:
                print(f"nsqd {i} refused the peer list of epoch {self.epoch}: {status} {answer!r}", flush=True)

    async def produce(self, i: int) -> None:
        producer = Producer(self.nodes[i].tcp_address)
        n = 0
        while not self.stopping:
            body = b"n%d-%08d" % (i, n)
            n += 1
            try:
                await asyncio.wait_for(producer.publish(TOPIC, body), 10)
                self.acked.add(body)
            except Exception:
                self.failed += 1
                await asyncio.sleep(0.2)
            await asyncio.sleep(1 / self.rate)
        await producer.close()

    async def consume(self, i: int) -> None:
        while not self.stopping:
            consumer = self.consumers.get(i)
            if consumer is not None and (self.away or not consumer.running):
                await consumer.stop()
                self.delivered.update(d.body for d in consumer.deliveries)
                del self.consumers[i]
                consumer = None
            if consumer is None and not self.away:
                try:
                    self.consumers[i] = await Consumer(self.nodes[i].tcp_address, TOPIC, CHANNEL, rdy=100).start()
                except (Disconnected, OSError, asyncio.TimeoutError):
                    self.consumers.pop(i, None)
            await asyncio.sleep(0.5)

    async def faults(self, minutes: float, wipe: bool, membership: bool) -> None:
        end = time.monotonic() + minutes * 60
        while time.monotonic() < end:
            # half the faults strike with the consumers away since before, so that the
            # queues hold a backlog
            self.away = self.random.random() < 0.5
            await asyncio.sleep(self.random.uniform(3, 8))
            victim = self.random.randrange(3)
            kind = self.random.random()  # kill below the line, cut above it, or a new list
            kill_below = 0.35 if membership else 0.5
            if membership and kind >= 0.7:
                self.order, self.epoch = self.order[::-1], self.epoch + 1
                print(f"{time.strftime('%X')} peer list of epoch {self.epoch}: {', '.join(self.order)}", flush=True)
                for i in range(3):
                    await asyncio.to_thread(self.give_list, i)
            elif kind < kill_below:
                down = self.random.uniform(3, 6) if self.random.random() < 0.5 else 0.0
                print(f"{time.strftime('%X')} kill -9 nsqd {victim}{' and wipe' if wipe else ''}"
                      f"{'' if down else ', restarted at once'}", flush=True)
                self.nodes[victim].kill()
                if wipe:
                    shutil.rmtree(self.nodes[victim].workdir / "data", ignore_errors=True)
                await asyncio.sleep(down)
                await asyncio.to_thread(self.nodes[victim].start)
                await asyncio.to_thread(self.give_list, victim)
            else:
                print(f"{time.strftime('%X')} cut nsqd {victim} off", flush=True)
                for other in range(3):
                    if other != victim:
                        self.spaces.cut(victim, other)
                await asyncio.sleep(self.random.uniform(3, 6))
                self.spaces.heal()
            self.away = False
            await asyncio.sleep(4)  # recovery before the next fault: one fault at a time

    async def run(self, minutes: float, wipe: bool, membership: bool) -> int:
        for node in self.nodes:
            node.start()
        node0 = self.nodes[0]
        node0.post(f"/topic/create?topic={TOPIC}")
        node0.post(f"/channel/create?topic={TOPIC}&channel={CHANNEL}")
        tasks = [asyncio.create_task(self.produce(i)) for i in range(3)]
        tasks += [asyncio.create_task(self.consume(i)) for i in range(3)]
        await self.faults(minutes, wipe, membership)
        self.stopping = True
        await asyncio.gather(*tasks, return_exceptions=True)
        self.spaces.heal()
        # drain: a consumer on every node until nothing new arrives for 10 s
        drainers = [await Consumer(n.tcp_address, TOPIC, CHANNEL, rdy=500).start() for n in self.nodes]
        last, quiet_since = -1, time.monotonic()
        while time.monotonic() - quiet_since < 10:
            await asyncio.sleep(1)
            now = sum(len(d.deliveries) for d in drainers)
            if now != last:
                last, quiet_since = now, time.monotonic()
        for consumer in [*self.consumers.values(), *drainers]:
            await consumer.stop()
            self.delivered.update(d.body for d in consumer.deliveries)
        lost = self.acked - set(self.delivered)
        duplicates = sum(self.delivered.values()) - len(self.delivered)
        print(f"acknowledged {len(self.acked)}, failed publishes {self.failed}, delivered {len(self.delivered)} "
              f"distinct, lost {len(lost)}, duplicates {duplicates}")
        if lost:
            print("lost (the first 20):", b" ".join(sorted(lost)[:20]).decode())
        return 1 if lost else 0

    def close(self) -> None:
        for node in self.nodes:
            node.stop()
        self.spaces.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=5.0)
    parser.add_argument("--replicas", type=int, default=3)
    parser.add_argument("--rate", type=float, default=200.0, help="publishes per second per producer")
    parser.add_argument("--wipe", action="store_true", help="delete a killed node's data directory")
    parser.add_argument("--membership", action="store_true", help="new peer lists given live among the faults")
    parser.add_argument("--memory", action="store_true", help="without --sync-before-ack (memory queues)")
    parser.add_argument("--seed", type=int, default=int(time.time()))
    args = parser.parse_args()
    if not netns.available():
        print("needs root, ip and iptables", file=sys.stderr)
        return 2
    print(f"seed {args.seed}")
    with tempfile.TemporaryDirectory(prefix="replication-soak-") as root:
        soak = Soak(Path(root), args.replicas, args.rate, args.seed, args.memory)
        try:
            return asyncio.run(soak.run(args.minutes, args.wipe, args.membership))
        finally:
            soak.close()


if __name__ == "__main__":
    sys.exit(main())
