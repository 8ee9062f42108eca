"""Load generators with many connections, one process each (non-blocking sockets under one
epoll, no asyncio): the cheapest a Python client of thousands of consumers can be.

``consumers``: K consumers spread over the channels of one topic, each RDY ``rdy``,
finishing every message at once; a publisher sends the messages once all are
subscribed. The latency rows: a publisher at a fixed rate and one consumer, each message
timed from its send (a timestamp in its body) to its arrival."""
from __future__ import annotations

import os
import selectors
import socket
import struct
import threading
import time

from nsq_protocol import MAGIC_V2, commands

_FRAME = struct.Struct(">ii")
_MESSAGE = 2
_HEARTBEAT = b"_heartbeat_"


def _connect(address: str, blocking: bool = True) -> socket.socket:
    host, port = address.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=60)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.sendall(MAGIC_V2)
    sock.setblocking(blocking)
    return sock


def _read_frames(sock: socket.socket, want: int, buf: bytes = b"") -> tuple[list[tuple[int, bytes]], bytes]:
    """Block until ``want`` frames arrived; returns them and what is left over."""
    frames: list[tuple[int, bytes]] = []
    while len(frames) < want:
        while len(buf) >= 8 and len(frames) < want:
            size, kind = _FRAME.unpack_from(buf)
            if len(buf) < 4 + size:
                break
            frames.append((kind, buf[8:4 + size]))
            buf = buf[4 + size:]
        if len(frames) < want:
            data = sock.recv(1 << 16)
            if not data:
                raise ConnectionError("nsqd closed the connection")
            buf += data
    return frames, buf


class _Consumer:
    __slots__ = ("sock", "buf", "got")

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buf = b""
        self.got = 0


def _serve(consumer: _Consumer) -> int:
    """Read what arrived, FIN each message; returns how many messages."""
    try:
        data = consumer.sock.recv(1 << 16)
    except BlockingIOError:
        return 0
    if not data:
        raise ConnectionError("nsqd closed a consumer connection")
    buf = consumer.buf + data if consumer.buf else data
    out: list[bytes] = []
    pos, end, got = 0, len(buf), 0
    while end - pos >= 8:
        size, kind = _FRAME.unpack_from(buf, pos)
        if end - pos < 4 + size:
            break
        if kind == _MESSAGE:
            out.append(b"FIN " + buf[pos + 18:pos + 34] + b"\n")
            got += 1
        elif buf[pos + 8:pos + 4 + size] == _HEARTBEAT:
            out.append(b"NOP\n")
        pos += 4 + size
    consumer.buf = buf[pos:]
    if out:
        consumer.sock.sendall(b"".join(out))  # a few bytes: the socket buffer takes them
    return got


def consumers(address: str, topic: str, channels: list[str], count: int, messages: int, rdy: int = 1,
              timeout: float = 300.0, server_pid: int | None = None) -> dict:
    """``count`` consumers over ``channels`` (round-robin), then ``messages`` published by
    MPUB; seconds from the first MPUB until every channel's copy of every message was
    delivered and FINed (deliveries = messages x channels). With ``server_pid``, also that
    process's user and system CPU seconds over the same span (its connections' set-up
    left out)."""
    selector = selectors.EpollSelector()
    fleet: list[_Consumer] = []
    for i in range(count):
        sock = _connect(address)
        sock.sendall(commands.sub(topic, channels[i % len(channels)]) + commands.rdy(rdy))
        frames, rest = _read_frames(sock, 1)
        if frames[0][0] != 0:
            raise RuntimeError(f"SUB failed: {frames[0][1]!r}")
        sock.setblocking(False)
        consumer = _Consumer(sock)
        consumer.buf = rest
        fleet.append(consumer)
        selector.register(sock, selectors.EVENT_READ, consumer)
    publisher = _connect(address)
    body = b"x" * 200
    batch = 100
    cpu_at_start = cpu_times(server_pid) if server_pid is not None else None
    start = time.perf_counter()
    sent = 0
    while sent < messages:
        n = min(batch, messages - sent)
        publisher.sendall(commands.mpub(topic, [body] * n))
        _read_frames(publisher, 1)
        sent += n
    expected = messages * len(channels)
    delivered = 0
    deadline = start + timeout
    while delivered < expected:
        if time.perf_counter() > deadline:
            raise RuntimeError(f"only {delivered} of {expected} deliveries in {timeout}s")
        for key, _ in selector.select(1.0):
            delivered += _serve(key.data)
    seconds = time.perf_counter() - start
    cpu_at_end = cpu_times(server_pid) if server_pid is not None else None
    publisher.close()
    for consumer in fleet:
        selector.unregister(consumer.sock)
        consumer.sock.close()
    result = {"deliveries": delivered, "seconds": seconds}
    if cpu_at_start is not None and cpu_at_end is not None:
        result["server user s"] = cpu_at_end[0] - cpu_at_start[0]
        result["server system s"] = cpu_at_end[1] - cpu_at_start[1]
    return result


def cpu_times(pid: int) -> tuple[float, float]:
    """A process's user and system CPU seconds so far, from /proc."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


_STAMP = struct.Struct(">q")  # CLOCK_MONOTONIC nanoseconds at send, the body's first bytes


def subscribe_latency_consumer(address: str, topic: str, identify: dict | None = None,
                               rdy: int = 100) -> tuple[socket.socket, bytes]:
    """The consumer of the latency rows, subscribed (IDENTIFY ``identify`` when given)."""
    consumer = _connect(address)
    buf = b""
    if identify is not None:
        consumer.sendall(commands.identify(identify))
        _, buf = _read_frames(consumer, 1, buf)
    consumer.sendall(commands.sub(topic, "latency") + commands.rdy(rdy))
    _, buf = _read_frames(consumer, 1, buf)
    return consumer, buf


def time_deliveries(consumer: socket.socket, buf: bytes, messages: int) -> list[int]:
    """Per message, nanoseconds from its send (its body's stamp) to its arrival here."""
    latencies: list[int] = []
    while len(latencies) < messages:
        frames, buf = _read_frames(consumer, 1, buf)
        kind, data = frames[0]
        if kind == _MESSAGE:
            latencies.append(time.monotonic_ns() - _STAMP.unpack_from(data, 26)[0])
            consumer.sendall(b"FIN " + data[10:26] + b"\n")
        elif data == _HEARTBEAT:
            consumer.sendall(b"NOP\n")
    consumer.close()
    return latencies


def stamped_publisher(address: str, topic: str, rate: float, messages: int) -> dict:
    """PUBs at ``rate`` on one connection, each sent when due whatever the answers (a
    thread reads the OKs), each body stamped with its send time."""
    publisher = _connect(address)
    answers = threading.Thread(target=_drain_answers, args=(publisher, messages), daemon=True)
    answers.start()
    padding = b"x" * 192
    start = time.perf_counter() + 0.05
    for i in range(messages):
        delay = start + i / rate - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        publisher.sendall(commands.pub(topic, _STAMP.pack(time.monotonic_ns()) + padding))
    answers.join()
    publisher.close()
    return {"messages": messages, "seconds": time.perf_counter() - start}


def _drain_answers(sock: socket.socket, count: int) -> None:
    buf = b""
    got = 0
    while got < count:
        frames, buf = _read_frames(sock, 1, buf)
        if frames[0][1] != _HEARTBEAT:
            got += 1
        else:
            sock.sendall(b"NOP\n")
