"""Raw protocol V2 load generators, each meant to run in its own process (blocking
sockets, no asyncio: the cheapest a single-threaded Python client can be)."""
from __future__ import annotations

import socket
import threading
import time

from nsq_protocol import MAGIC_V2, commands
from nsq_protocol.frames import FRAME_ERROR, FRAME_MESSAGE, FrameDecoder

BODY_SIZE = 200


def connect(address: str) -> socket.socket:
    host, port = address.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=60)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.sendall(MAGIC_V2)
    return sock


class Reader:
    """Frames from a blocking socket; answers heartbeats."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.decoder = FrameDecoder()

    def frames(self):
        while True:  # frames already received first: a caller may stop in the middle of a read's worth
            for frame in self.decoder:
                if frame.type == FRAME_ERROR:
                    raise RuntimeError(frame.data.decode())
                if frame.type != FRAME_MESSAGE and frame.data == b"_heartbeat_":
                    self.sock.sendall(commands.nop())
                    continue
                yield frame
            data = self.sock.recv(1 << 20)
            if not data:
                raise ConnectionError("nsqd closed the connection")
            self.decoder.feed(data)

    def expect_responses(self, n: int) -> None:
        if n <= 0:
            return
        got = 0
        for _ in self.frames():
            got += 1
            if got == n:
                return


def body(i: int) -> bytes:
    return (b"%010d" % i).ljust(BODY_SIZE, b"x")


def pub_sync(address: str, topic: str, count: int) -> dict:
    """One PUB at a time, waiting for each OK; records every round trip."""
    sock = connect(address)
    reader = Reader(sock)
    latencies = []
    start = time.perf_counter()
    for i in range(count):
        t0 = time.perf_counter()
        sock.sendall(commands.pub(topic, body(i)))
        reader.expect_responses(1)
        latencies.append(time.perf_counter() - t0)
    elapsed = time.perf_counter() - start
    sock.close()
    return {"messages": count, "seconds": elapsed, "latencies": latencies}


def pub_paced(address: str, topic: str, count: int, rate: float) -> dict:
    """PUB at a fixed rate on one connection, whatever the answers' latency (the
    latency-under-load row): a writer thread sends each PUB when it is due, without waiting
    for the previous OK, and the latency of a PUB is from its send to its OK (OKs come back
    in order). Waiting for each OK before the next would cap the rate at one per round
    trip and hide the latency of the PUBs that should have been sent meanwhile."""
    sock = connect(address)
    reader = Reader(sock)
    sent_at = [0.0] * count
    cmds = [commands.pub(topic, body(i)) for i in range(count)]
    start = time.perf_counter() + 0.01

    def write() -> None:
        for i in range(count):
            delay = start + i / rate - time.perf_counter()
            if delay > 0:
                time.sleep(delay)  # not a spin: the reader needs the GIL as soon as an OK arrives
            sent_at[i] = time.perf_counter()
            sock.sendall(cmds[i])

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    latencies = []
    for i in range(count):
        reader.expect_responses(1)
        latencies.append(time.perf_counter() - sent_at[i])
    elapsed = time.perf_counter() - start
    writer.join()
    sock.close()
    return {"messages": count, "seconds": elapsed, "latencies": latencies}


def pub_pipelined(address: str, topic: str, count: int, window: int = 256) -> dict:
    """PUBs written in windows of ``window`` commands, OKs read after each window."""
    sock = connect(address)
    reader = Reader(sock)
    cmds = [commands.pub(topic, body(i)) for i in range(window)]
    blob = b"".join(cmds)
    start = time.perf_counter()
    sent = 0
    while sent < count:
        n = min(window, count - sent)
        sock.sendall(blob if n == window else b"".join(cmds[:n]))
        reader.expect_responses(n)
        sent += n
    elapsed = time.perf_counter() - start
    sock.close()
    return {"messages": count, "seconds": elapsed}


def mpub(address: str, topic: str, count: int, batch: int = 100, window: int = 8) -> dict:
    """MPUB batches, ``window`` batches in flight."""
    sock = connect(address)
    reader = Reader(sock)
    cmd = commands.mpub(topic, [body(i) for i in range(batch)])
    batches = max(1, count // batch)
    start = time.perf_counter()
    sent = 0
    while sent < batches:
        n = min(window, batches - sent)
        sock.sendall(cmd * n)
        reader.expect_responses(n)
        sent += n
    elapsed = time.perf_counter() - start
    sock.close()
    return {"messages": batches * batch, "seconds": elapsed}


def dpub(address: str, topic: str, count: int, window: int = 256, defer_ms: int = 3_600_000) -> dict:
    sock = connect(address)
    reader = Reader(sock)
    cmds = b"".join(commands.dpub(topic, defer_ms, body(i)) for i in range(window))
    start = time.perf_counter()
    sent = 0
    while sent < count:
        sock.sendall(cmds)
        reader.expect_responses(window)
        sent += window
    elapsed = time.perf_counter() - start
    sock.close()
    return {"messages": sent, "seconds": elapsed}


def consume(address: str, topic: str, channel: str, count: int, rdy: int = 1000) -> dict:
    """SUB, RDY ``rdy``, FIN every message, until ``count`` messages arrived."""
    sock = connect(address)
    reader = Reader(sock)
    sock.sendall(commands.sub(topic, channel) + commands.rdy(rdy))
    frames = reader.frames()
    next(frames)  # SUB's OK
    got = 0
    start = None
    fins: list[bytes] = []
    decoder = reader.decoder
    while got < count:
        data = sock.recv(1 << 20)
        if not data:
            raise ConnectionError("nsqd closed the connection")
        if start is None:
            start = time.perf_counter()
        decoder.feed(data)
        for frame in decoder:
            if frame.type == FRAME_MESSAGE:
                got += 1
                fins.append(b"FIN " + frame.data[10:26] + b"\n")
            elif frame.data == b"_heartbeat_":
                fins.append(b"NOP\n")
        if fins:
            sock.sendall(b"".join(fins))
            fins.clear()
    elapsed = time.perf_counter() - (start or time.perf_counter())
    sock.close()
    return {"messages": got, "seconds": elapsed}
