"""nsqd's memory as consumers come and go (issue 37): our nsqd and Go's side by side, one
process each on 127.0.0.1, driven at the same time by this process (asyncio, raw V2).

    .venv/bin/python bench/consumer_churn.py series [--connections 30000] [--every 1000]
    .venv/bin/python bench/consumer_churn.py soak [--minutes 20] [--rate 1000] [--joins 2]
    ... --also "before=env PYTHONPATH=<tree>/broker:<tree>/protocol .venv/bin/nsqd"   # a third

- ``series``: the issue's table. Each connection sends the magic, ``SUB t cN`` on one of
  10 channels (``--ephemeral``: ``cN#ephemeral``; ``--mixed``: half of each) of a topic
  holding one message, reads the OK, sends ``RDY 1``, waits 10 ms, half of them ``CLS``
  (waiting for CLOSE_WAIT), and closes. RSS after every ``--every`` connections, once
  nsqd's /stats shows no client left.
- ``soak``: ``--rate`` messages/s published (MPUB every 0.1 s) to a topic with two
  durable channels, each with a consumer that stays and FINs all it gets (the backlog
  stays bounded); other consumers join about ``--joins`` times a second (a durable channel
  or a fresh ``#ephemeral`` one), each with RDY 20 for 0.5-4 s: 90% of the messages
  FINed, 5% REQed with a delay up to 500 ms, 5% left to time out (--msg-timeout=5s);
  half leave with CLS; a topic is created and the one before deleted every 0.2 s. RSS
  printed every minute, and each one's growth per minute over the second half.

Prints figures only. ``NSQD_REF`` names another Go nsqd (empty: ours only), like every
bench here.
"""
from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import random
import struct
import sys
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from nsqd_proc import HOST, OURS, Server, reference_nsqd  # noqa: E402

MAGIC = b"  V2"
MB = 1024 * 1024
FRAME_RESPONSE, FRAME_ERROR, FRAME_MESSAGE = 0, 1, 2


class Conn:
    """A raw V2 connection: frames read as they come."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    @classmethod
    async def open(cls, port: int) -> "Conn":
        reader, writer = await asyncio.open_connection(HOST, port)
        writer.write(MAGIC)
        return cls(reader, writer)

    async def frame(self) -> tuple[int, bytes]:
        size, kind = struct.unpack(">ii", await self.reader.readexactly(8))
        return kind, await self.reader.readexactly(size - 4)

    async def response(self) -> bytes:
        """The next response other than a heartbeat (answering heartbeats); messages before
        it are dropped (they time out)."""
        while True:
            kind, data = await self.frame()
            if kind == FRAME_RESPONSE and data == b"_heartbeat_":
                self.writer.write(b"NOP\n")
            elif kind in (FRAME_RESPONSE, FRAME_ERROR):
                return data

    def close(self) -> None:
        self.writer.close()


def mpub(topic: str, bodies: list[bytes]) -> bytes:
    body = struct.pack(">i", len(bodies)) + b"".join(struct.pack(">i", len(b)) + b for b in bodies)
    return f"MPUB {topic}\n".encode() + struct.pack(">i", len(body)) + body


def pub(topic: str, body: bytes) -> bytes:
    return f"PUB {topic}\n".encode() + struct.pack(">i", len(body)) + body


async def http(port: int, method: str, path: str) -> bytes:
    reader, writer = await asyncio.open_connection(HOST, port)
    writer.write(f"{method} {path} HTTP/1.1\r\nHost: {HOST}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".encode())
    data = await reader.read()
    writer.close()
    return data.split(b"\r\n\r\n", 1)[1] if b"\r\n\r\n" in data else b""


def client_count(server: Server) -> int:
    url = f"http://{HOST}:{server.http}/stats?format=json"
    with urllib.request.urlopen(url, timeout=30) as resp:
        doc = json.load(resp)
    return sum(c["client_count"] for t in doc["topics"] for c in t["channels"]) + len(doc.get("producers") or [])


async def no_clients(server: Server) -> None:
    deadline = time.monotonic() + 60
    while await asyncio.to_thread(client_count, server) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)


# -- series ---------------------------------------------------------------------------

async def subscribe_and_leave(server: Server, index: int, channel: str) -> None:
    conn = await Conn.open(server.tcp)
    try:
        conn.writer.write(f"SUB t {channel}\n".encode())
        assert await conn.response() == b"OK"
        conn.writer.write(b"RDY 1\n")
        await asyncio.sleep(0.01)
        if index % 2:
            conn.writer.write(b"CLS\n")
            assert await conn.response() == b"CLOSE_WAIT"
    finally:
        conn.close()


async def series(server: Server, connections: int, every: int, channels: list[str],
                 concurrency: int, rows: list[float]) -> None:
    conn = await Conn.open(server.tcp)
    conn.writer.write(pub("t", b"one message"))
    assert await conn.response() == b"OK"
    conn.close()
    counter = itertools.count()

    async def worker(limit: int) -> None:
        while (i := next(counter)) < limit:
            await subscribe_and_leave(server, i, channels[i % len(channels)])

    for done in range(every, connections + 1, every):
        await asyncio.gather(*(worker(done) for _ in range(concurrency)))
        counter = itertools.count(done)
        await no_clients(server)
        rows.append(server.rss() / MB)


async def run_series(servers: dict[str, Server], args: argparse.Namespace) -> None:
    names = [f"c{i}" for i in range(10)]
    if args.ephemeral:
        names = [f"c{i}#ephemeral" for i in range(10)]
    elif args.mixed:
        names = [f"c{i}" for i in range(5)] + [f"e{i}#ephemeral" for i in range(5)]
    rows: dict[str, list[float]] = {name: [] for name in servers}
    start = {name: s.rss() / MB for name, s in servers.items()}
    began = time.monotonic()
    await asyncio.gather(*(series(s, args.connections, args.every, names, args.concurrency, rows[name])
                           for name, s in servers.items()))
    print(f"subscribe and leave, channels {names[0]}..{names[-1]}, {time.monotonic() - began:.0f} s; "
          f"RSS MB at start: " + ", ".join(f"{n} {v:.1f}" for n, v in start.items()))
    print("| connections | " + " | ".join(f"{(i + 1) * args.every / 1000:g}k" for i in range(len(rows['ours']))) + " |")
    for name, values in rows.items():
        print(f"| {name}, MB | " + " | ".join(f"{v:.1f}" for v in values) + " |")


# -- soak -----------------------------------------------------------------------------

class Soak:
    def __init__(self, server: Server, rate: int, joins: float) -> None:
        self.server, self.rate, self.joins = server, rate, joins
        self.published = self.finished = self.requeued = self.ignored = self.consumers = 0
        self.topics_made = 0

    async def publisher(self, until: float) -> None:
        conn = await Conn.open(self.server.tcp)
        per_tick = max(1, self.rate // 10)
        body = b"x" * 100
        next_tick = time.monotonic()
        while time.monotonic() < until:
            conn.writer.write(mpub("soak", [body] * per_tick))
            assert await conn.response() == b"OK"
            self.published += per_tick
            next_tick += 0.1
            await asyncio.sleep(max(0.0, next_tick - time.monotonic()))
        conn.close()

    async def consumer(self, index: int) -> None:
        channel = ("c0", "c1", f"e{index}#ephemeral")[index % 3]
        conn = await Conn.open(self.server.tcp)
        try:
            conn.writer.write(f"SUB soak {channel}\nRDY 20\n".encode())
            leave = time.monotonic() + random.uniform(0.5, 4.0)
            while (left := leave - time.monotonic()) > 0:
                try:
                    kind, data = await asyncio.wait_for(conn.frame(), left)
                except asyncio.TimeoutError:
                    break
                if kind == FRAME_RESPONSE and data == b"_heartbeat_":
                    conn.writer.write(b"NOP\n")
                elif kind == FRAME_MESSAGE:
                    msg_id = data[10:26]
                    roll = random.random()
                    if roll < 0.90:
                        conn.writer.write(b"FIN " + msg_id + b"\n")
                        self.finished += 1
                    elif roll < 0.95:
                        conn.writer.write(b"REQ " + msg_id + b" %d\n" % random.randrange(500))
                        self.requeued += 1
                    else:
                        self.ignored += 1
            if index % 2:
                conn.writer.write(b"CLS\n")
                await asyncio.wait_for(conn.response(), 5)  # CLOSE_WAIT (messages after it are dropped)
        except (asyncio.TimeoutError, asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            conn.close()
            self.consumers += 1

    async def steady(self, channel: str, until: float) -> None:
        """A consumer that stays and FINs everything: the backlog stays bounded, so the RSS
        measures what the churn leaves behind rather than queued messages."""
        conn = await Conn.open(self.server.tcp)
        conn.writer.write(f"SUB soak {channel}\nRDY 50\n".encode())
        while (left := until - time.monotonic()) > 0:
            try:
                kind, data = await asyncio.wait_for(conn.frame(), left)
            except asyncio.TimeoutError:
                break
            if kind == FRAME_RESPONSE and data == b"_heartbeat_":
                conn.writer.write(b"NOP\n")
            elif kind == FRAME_MESSAGE:
                conn.writer.write(b"FIN " + data[10:26] + b"\n")
                self.finished += 1
        conn.close()

    async def consumers_churn(self, until: float) -> None:
        tasks: set[asyncio.Task[None]] = set()
        for index in itertools.count():
            if time.monotonic() >= until:
                break
            task = asyncio.create_task(self.consumer(index))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
            await asyncio.sleep(random.expovariate(self.joins))
        await asyncio.gather(*tasks)

    async def topics_churn(self, until: float) -> None:
        conn = await Conn.open(self.server.tcp)
        previous = None
        while time.monotonic() < until:
            name = f"tmp{self.topics_made}"
            conn.writer.write(pub(name, b"x"))
            assert await conn.response() == b"OK"
            if previous is not None:
                await http(self.server.http, "POST", f"/topic/delete?topic={previous}")
            previous, self.topics_made = name, self.topics_made + 1
            await asyncio.sleep(0.2)
        conn.close()

    async def run(self, until: float) -> None:
        await asyncio.gather(self.publisher(until), self.consumers_churn(until), self.topics_churn(until),
                             self.steady("c0", until), self.steady("c1", until))


async def run_soak(servers: dict[str, Server], args: argparse.Namespace) -> None:
    began = time.monotonic()
    until = began + args.minutes * 60
    soaks = {name: Soak(s, args.rate, args.joins) for name, s in servers.items()}
    rows: dict[str, list[float]] = {name: [s.rss() / MB] for name, s in servers.items()}
    print(f"soak: {args.rate} msgs/s, consumers joining {args.joins}/s, a topic made and deleted every 0.2 s")
    print("| minute | " + " | ".join(f"{n} RSS MB" for n in servers) + " | consumers so far (" + ", ".join(servers) + ") |")
    print("| 0 | " + " | ".join(f"{rows[n][0]:.1f}" for n in servers) + " | |")

    async def sample() -> None:
        for minute in range(1, args.minutes + 1):
            await asyncio.sleep(max(0.0, began + minute * 60 - time.monotonic()))
            for name, s in servers.items():
                rows[name].append(s.rss() / MB)
            print(f"| {minute} | " + " | ".join(f"{rows[n][-1]:.1f}" for n in servers) + " | "
                  + ", ".join(str(soaks[n].consumers) for n in servers) + " |", flush=True)

    await asyncio.gather(sample(), *(soak.run(until) for soak in soaks.values()))
    for name, soak in soaks.items():
        values = rows[name]
        half = len(values) // 2
        slope = (values[-1] - values[half]) / max(1, len(values) - 1 - half)
        print(f"{name}: {soak.published} published, {soak.finished} FIN, {soak.requeued} REQ, "
              f"{soak.ignored} left to time out, {soak.consumers} consumers, {soak.topics_made} topics; "
              f"RSS {values[0]:.1f} -> {values[-1]:.1f} MB, second half {slope:+.2f} MB/min")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("mode", choices=["series", "soak"])
    parser.add_argument("--connections", type=int, default=30000)
    parser.add_argument("--every", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=20)
    parser.add_argument("--ephemeral", action="store_true")
    parser.add_argument("--mixed", action="store_true")
    parser.add_argument("--minutes", type=int, default=20)
    parser.add_argument("--rate", type=int, default=1000)
    parser.add_argument("--joins", type=float, default=2.0)
    parser.add_argument("--ours", default=OURS, help="our nsqd's command (another tree's, say)")
    parser.add_argument("--also", action="append", default=[], metavar="NAME=COMMAND",
                        help="one more nsqd to run beside them (say, an older tree's)")
    args = parser.parse_args()
    flags = ["--msg-timeout=5s"] if args.mode == "soak" else []
    servers = {"ours": Server(args.ours, flags)}
    try:
        for also in args.also:
            name, command = also.split("=", 1)
            servers[name] = Server(command, flags)
        ref = reference_nsqd()
        if ref:
            servers["go"] = Server(ref, flags)
        asyncio.run(run_series(servers, args) if args.mode == "series" else run_soak(servers, args))
    finally:
        for s in servers.values():
            s.close()


if __name__ == "__main__":
    main()
