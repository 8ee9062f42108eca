"""nsqd's own work per message, in this process: no sockets, no other process, so the
figure does not move with the machine's load.

    .venv/bin/python bench/inproc.py [--command mpub|pub|consume] [--batch 1] [--count 20000] [--rounds 7]
    env PYTHONPATH=<tree>/broker:<tree>/protocol .venv/bin/python bench/inproc.py   # another tree

A started nsqd (listening on 127.0.0.1, unused) gets V2 connections over transports that
keep nothing (a consumer's keeps what it is sent). Each read handed to a connection is
followed by one turn of the event loop (its answers written, its callbacks run), as a
client that waits for every answer makes it.

- ``mpub``: ``--count`` reads per round, each an MPUB of ``--batch`` 200-byte messages
  (batch 1 is what Go's ``bench_writer -batch-size=1`` sends).
- ``pub``: ``--count`` reads per round, each ``--batch`` PUBs of one message (pipelined).
- ``consume``: ``--count`` messages per round are published (MPUB of ``--batch``, not
  timed), then one consumer with RDY 2500 takes them, answering each read's messages
  with one read of FINs (timed: only nsqd's own calls, not the consumer's parsing).
- ``rdy1``: ``--consumers`` consumers with RDY 1 over 10 channels (the ``consumers_2000``
  row of ``bench/scale.py``); ``--count`` messages per channel and round are published
  (not timed), then every consumer holding a message FINs it in a read of its own, which
  nsqd answers with the consumer's next message (timed: the reads of a pass over the
  consumers and the loop turn after it).

Printed: the best round's CPU time of this thread per message, and the median. For
instruction counts, run it under ``valgrind --tool=callgrind`` with two counts and take
the difference.
"""
from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import struct
import sys
import tempfile
import time

from nsq_protocol import MAGIC_V2

from nsqd.nsqd import NSQD
from nsqd.options import NsqdOptions
from nsqd.protocol_v2 import V2Protocol

BODY = b"x" * 200
TOPIC = "inproc"
RDY = 2500
FRAME_HEAD = struct.Struct(">ii")


class NullTransport:
    """What V2Protocol and ClientConn ask of a transport; keeps what is written only when
    asked to (a consumer's)."""

    def __init__(self, keep: bool = False, last_only: bool = False) -> None:
        self.keep = keep
        self.written: list[bytes] = []
        self.closed = False
        if last_only:  # a builtin as the write, about as cheap as uvloop's
            self.write = self.written.append  # type: ignore[method-assign]

    def write(self, data: bytes) -> None:
        if self.keep:
            self.written.append(bytes(data))

    def writelines(self, chunks: list[bytes]) -> None:
        for chunk in chunks:
            self.write(chunk)

    def get_extra_info(self, name: str, default: object = None) -> object:
        return ("127.0.0.1", 1) if name in ("peername", "sockname") else default

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        return None

    def get_write_buffer_size(self) -> int:
        return 0

    def is_closing(self) -> bool:
        return self.closed

    def pause_reading(self) -> None:
        return None

    def resume_reading(self) -> None:
        return None

    def close(self) -> None:
        self.closed = True


def publish_command(kind: str, batch: int) -> bytes:
    if kind == "pub":
        return (f"PUB {TOPIC}\n".encode() + struct.pack(">i", len(BODY)) + BODY) * batch
    body = struct.pack(">i", batch) + (struct.pack(">i", len(BODY)) + BODY) * batch
    return f"MPUB {TOPIC}\n".encode() + struct.pack(">i", len(body)) + body


async def connect(nsqd: NSQD, keep: bool = False, last_only: bool = False) -> tuple[V2Protocol, NullTransport]:
    proto, transport = V2Protocol(nsqd), NullTransport(keep, last_only)
    proto.connection_made(transport)  # type: ignore[arg-type]
    identify = json.dumps({"client_id": "inproc", "feature_negotiation": True}).encode()
    proto.data_received(MAGIC_V2 + b"IDENTIFY\n" + struct.pack(">i", len(identify)) + identify)
    await asyncio.sleep(0)
    return proto, transport


def message_ids(chunks: list[bytes]) -> list[bytes]:
    ids: list[bytes] = []
    for chunk in chunks:
        pos = 0
        while pos < len(chunk):
            size, kind = FRAME_HEAD.unpack_from(chunk, pos)
            if kind == 2:
                ids.append(chunk[pos + 18:pos + 34])
            pos += 4 + size
    return ids


async def publish_rounds(nsqd: NSQD, kind: str, batch: int, count: int, rounds: int) -> list[float]:
    proto, _ = await connect(nsqd)
    read = publish_command(kind, batch)
    data_received, turn = proto.data_received, asyncio.sleep
    per_message: list[float] = []
    for _ in range(rounds):
        start = time.thread_time()
        for _ in range(count):
            data_received(read)
            await turn(0)
        per_message.append((time.thread_time() - start) / (count * batch))
    return per_message


async def consume_rounds(nsqd: NSQD, batch: int, count: int, rounds: int) -> list[float]:
    publisher, _ = await connect(nsqd)
    consumer, received = await connect(nsqd, keep=True)
    consumer.data_received(f"SUB {TOPIC} c\nRDY {RDY}\n".encode())
    await asyncio.sleep(0)
    received.written.clear()
    read = publish_command("mpub", batch)
    per_message: list[float] = []
    for _ in range(rounds):
        for _ in range(count // batch):
            publisher.data_received(read)
            await asyncio.sleep(0)
        done, spent = 0, 0.0
        while done < count:
            ids = message_ids(received.written)
            received.written.clear()
            fins = b"".join(b"FIN %s\n" % msg_id for msg_id in ids)
            start = time.thread_time()
            if fins:
                consumer.data_received(fins)
            await asyncio.sleep(0)
            spent += time.thread_time() - start
            done += len(ids)
        per_message.append(spent / count)
    return per_message


async def rdy1_rounds(nsqd: NSQD, consumers: int, count: int, rounds: int) -> list[float]:
    channels = 10
    publisher, _ = await connect(nsqd)
    fleet: list[tuple[V2Protocol, list[bytes]]] = []
    for i in range(consumers):
        proto, transport = await connect(nsqd, last_only=True)
        proto.data_received(f"SUB {TOPIC} c{i % channels}\nRDY 1\n".encode())
        await asyncio.sleep(0)
        transport.written.clear()
        fleet.append((proto, transport.written))
    read = publish_command("mpub", 100)
    per_delivery: list[float] = []
    for _ in range(rounds):
        for _ in range(count // 100):
            publisher.data_received(read)
            await asyncio.sleep(0)
        done, spent = 0, 0.0
        while done < count * channels:
            reads = []
            for proto, written in fleet:
                if written:
                    ids = message_ids(written)
                    written.clear()
                    reads.append((proto.data_received, b"".join(b"FIN %s\n" % msg_id for msg_id in ids)))
                    done += len(ids)
            start = time.thread_time()
            for data_received, fins in reads:
                data_received(fins)
            await asyncio.sleep(0)
            spent += time.thread_time() - start
        per_delivery.append(spent / (count * channels))
    return per_delivery


async def measure(kind: str, batch: int, count: int, rounds: int, consumers: int = 2000) -> list[float]:
    with tempfile.TemporaryDirectory(prefix="inproc-") as data_path:
        nsqd = NSQD(NsqdOptions(data_path=data_path, tcp_address="127.0.0.1:0", http_address="127.0.0.1:0",
                                mem_queue_size=count * rounds * batch + 1, max_rdy_count=RDY))
        await nsqd.start()
        while not getattr(nsqd, "loaded", True):
            await asyncio.sleep(0.01)
        try:
            if kind == "consume":
                return await consume_rounds(nsqd, batch, count, rounds)
            if kind == "rdy1":
                return await rdy1_rounds(nsqd, consumers, count, rounds)
            return await publish_rounds(nsqd, kind, batch, count, rounds)
        finally:
            nsqd.delete_topic(TOPIC)  # nothing to write at stop: the run's work is what it measured
            await nsqd.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--command", choices=["mpub", "pub", "consume", "rdy1"], default="mpub")
    parser.add_argument("--consumers", type=int, default=2000, help="rdy1's consumers")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--count", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--no-uvloop", action="store_true")
    args = parser.parse_args()
    if not args.no_uvloop:
        import uvloop
        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    gc.freeze()
    gc.set_threshold(100_000, 50, 100)  # as nsqd's cli sets it
    results = asyncio.run(measure(args.command, args.batch, args.count, args.rounds, args.consumers))
    tree = os.path.dirname(os.path.dirname(sys.modules["nsqd"].__file__ or ""))
    print(f"{args.command} x{args.batch} tree={tree} best {min(results) * 1e6:.2f} us/message, "
          f"median {sorted(results)[len(results) // 2] * 1e6:.2f} us ({args.rounds} rounds)")


if __name__ == "__main__":
    main()
