"""Garbage in: random bytes, oversized frames, half-written commands and broken compressed
streams from many connections at once must leave nsqd serving the well-behaved clients
next to them, with every message accounted for and no internal error logged."""
from __future__ import annotations

import json
import random
import socket
import struct
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

from hypothesis import given, settings
from hypothesis import strategies as st

from nsq_protocol import MAGIC_V2, FrameDecoder, ProtocolError
from tests.broker.wire import Closed, Silent, WireConn
from tests.servers import Nsqd, http, wait_for

Address = tuple[str, int]


def _drain(sock: socket.socket, seconds: float) -> bytes:
    """Whatever the server sends until it closes or goes quiet for ``seconds``."""
    sock.settimeout(seconds)
    got = b""
    try:
        while chunk := sock.recv(65536):
            got += chunk
    except (socket.timeout, OSError):
        pass
    return got


def _conn(address: Address) -> socket.socket:
    sock = socket.create_connection(address, timeout=3)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


# -- the abuse, one kind per function ----------------------------------------------------
def no_magic(address: Address, rng: random.Random) -> None:
    with _conn(address) as s:
        s.sendall(b"XX" + rng.randbytes(rng.randint(2, 64)))
        _drain(s, 1)


def random_after_magic(address: Address, rng: random.Random) -> None:
    with _conn(address) as s:
        s.sendall(MAGIC_V2 + rng.randbytes(rng.randint(1, 4096)))
        _drain(s, 0.3)


def oversized_bodies(address: Address, rng: random.Random) -> None:
    name = rng.choice([b"PUB junk", b"MPUB junk", b"DPUB junk 10", b"IDENTIFY", b"AUTH"])
    size = rng.choice([2**31 - 1, 2**32 - 1, 64 * 1024 * 1024, 0x80000000])
    with _conn(address) as s:
        s.sendall(MAGIC_V2 + name + b"\n" + struct.pack(">I", size) + rng.randbytes(100))
        _drain(s, 1)


def half_written(address: Address, rng: random.Random) -> None:
    partial = rng.choice([b"PUB junk\n\x00\x00", b"MPUB junk\n\x00\x00\x00\x64" + b"\x00" * 10,
                          b"SUB junk", b"IDENTIFY\n\x00\x00\x00\x10{\"cli", b"  V", b""])
    with _conn(address) as s:
        s.sendall(MAGIC_V2 + partial if partial != b"  V" else partial)
        _drain(s, rng.uniform(0.2, 1.0))  # hold the connection open, then leave mid-command


def endless_line(address: Address, rng: random.Random) -> None:
    with _conn(address) as s:
        try:
            s.sendall(MAGIC_V2 + b"PUB " + b"a" * rng.randint(17_000, 40_000))
        except OSError:
            return
        _drain(s, 1)


def broken_compression(address: Address, rng: random.Random) -> None:
    feature = rng.choice(["deflate", "snappy"])
    conn = WireConn(address, timeout=3)
    try:
        conn.negotiate({feature: True})
        conn.send_raw(rng.randbytes(rng.randint(1, 512)))
        conn.closed_within(1)
    except (Closed, Silent, OSError, AssertionError, ProtocolError):
        pass
    finally:
        conn.close()


def plausible_commands(address: Address, rng: random.Random) -> None:
    def body(data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + data

    choices: list[Callable[[], bytes]] = [
        lambda: b"NOP\n",
        lambda: b"RDY " + str(rng.randint(-5, 10**6)).encode() + b"\n",
        lambda: b"FIN " + rng.randbytes(rng.choice([0, 15, 16, 17])) + b"\n",
        lambda: b"REQ " + rng.randbytes(16) + b" " + str(rng.randint(-1, 99)).encode() + b"\n",
        lambda: b"TOUCH " + rng.randbytes(16) + b"\n",
        lambda: b"CLS\n",
        lambda: b"SUB " + rng.choice([b"junk ch", b"bad/topic ch", b"junk", b"junk bad!chan"]) + b"\n",
        lambda: b"PUB junk\n" + body(rng.randbytes(rng.randint(1, 64))),
        lambda: b"MPUB junk\n" + body(rng.randbytes(rng.randint(0, 64))),
        lambda: b"DPUB junk " + str(rng.randint(-10, 10**8)).encode() + b"\n" + body(b"x"),
        lambda: b"IDENTIFY\n" + body(rng.choice([b"{", b"[]", b'{"heartbeat_interval": "x"}',
                                                 json.dumps({"deflate_level": 99}).encode()])),
        lambda: b"AUTH\n" + body(b"secret"),
        lambda: rng.randbytes(rng.randint(1, 32)) + b"\n",
    ]
    with _conn(address) as s:
        try:
            s.sendall(MAGIC_V2 + b"".join(rng.choice(choices)() for _ in range(rng.randint(1, 12))))
        except OSError:
            return
        _drain(s, 0.3)


def reset_mid_stream(address: Address, rng: random.Random) -> None:
    s = _conn(address)
    s.sendall(MAGIC_V2 + b"PUB junk\n" + struct.pack(">I", 1000) + rng.randbytes(rng.randint(0, 999)))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    s.close()  # RST instead of FIN


ABUSE = [no_magic, random_after_magic, oversized_bodies, half_written, endless_line,
         broken_compression, plausible_commands, reset_mid_stream]


# -- the well-behaved clients ----------------------------------------------------------------
class GoodConsumer(threading.Thread):
    def __init__(self, address: str, topic: str) -> None:
        super().__init__(daemon=True)
        self.conn = WireConn(address, timeout=10)
        self.conn.sub(topic, "ch")
        self.conn.expect_ok()
        self.conn.rdy(50)
        self.expected: int | None = None
        self.bodies: list[bytes] = []
        self.error: BaseException | None = None

    def run(self) -> None:
        """Read and FIN until ``expected`` (set once publishing is over) are in."""
        try:
            deadline = time.monotonic() + 60
            while (self.expected is None or len(self.bodies) < self.expected) and time.monotonic() < deadline:
                try:
                    msg = self.conn.read_message(timeout=0.5)
                except Silent:
                    continue
                self.bodies.append(msg.body)
                self.conn.fin(msg.id)
        except BaseException as e:  # reported by the test
            self.error = e


def publish_steadily(address: str, topic: str, until: Callable[[], bool], max_batches: int) -> list[bytes]:
    """PUB one and MPUB four, over and over, until ``until()`` or ``max_batches``."""
    conn = WireConn(address, timeout=10)
    sent: list[bytes] = []
    try:
        for _ in range(max_batches):
            if until():
                break
            single = b"good-%04d" % len(sent)
            conn.pub(topic, single)
            conn.expect_ok()
            sent.append(single)
            many = [b"good-%04d" % (len(sent) + j) for j in range(4)]
            conn.mpub(topic, many)
            conn.expect_ok()
            sent += many
    finally:
        conn.close()
    return sent


def test_garbage_from_many_connections_leaves_good_clients_served(nsqd: Nsqd, topic: str) -> None:
    """On the shared nsqd (the garbage only touches the topic ``junk``), 160 abusive
    connections, 40 at a time, about 20 of each kind."""
    log_start = nsqd.log_path.stat().st_size
    address: Address = (nsqd.host, nsqd.tcp_port)
    consumer = GoodConsumer(nsqd.tcp_address, topic)
    consumer.start()
    rng = random.Random(20240601)
    jobs = [(rng.choice(ABUSE), random.Random(rng.random())) for _ in range(160)]

    with ThreadPoolExecutor(max_workers=40) as pool:
        abuse = [pool.submit(kind, address, job_rng) for kind, job_rng in jobs]
        # the good publisher works for as long as the abuse lasts
        sent = publish_steadily(nsqd.tcp_address, topic, lambda: all(f.done() for f in abuse),
                                max_batches=2000)
        for future in abuse:
            future.result(timeout=30)
    consumer.expected = len(sent)

    consumer.join(30)
    assert consumer.error is None, consumer.error
    assert sorted(consumer.bodies) == sorted(sent)
    assert len(set(consumer.bodies)) == len(sent)
    assert http("GET", nsqd.url("/ping")) == (200, b"OK")
    channel = wait_for(lambda: (c := nsqd.channel(topic, "ch")) and c["in_flight_count"] == 0 and c)
    assert channel["depth"] == 0 and channel["message_count"] == len(sent)
    consumer.conn.close()
    with open(nsqd.log_path, "rb") as log:
        log.seek(log_start)
        assert b"Traceback" not in log.read()
    assert nsqd.proc is not None and nsqd.proc.poll() is None


# -- any bytes after the magic ---------------------------------------------------------------
@settings(max_examples=40, deadline=None)
@given(data=st.one_of(
    st.binary(min_size=1, max_size=600),
    st.lists(st.sampled_from([b"NOP\n", b"PUB fz\n", b"\x00\x00\x00\x02hi", b"RDY 3\n", b"SUB fz ch\n",
                              b"MPUB fz\n", b"\x00\x00\x00\x01", b"IDENTIFY\n", b"{}", b"\n", b"FIN 0\n",
                              b"\xff\xff\xff\xff", b"CLS\n", b"DPUB fz 5\n"]),
             min_size=1, max_size=20).map(b"".join),
))
def test_any_bytes_get_well_formed_frames_or_a_close(nsqd: Nsqd, data: bytes) -> None:
    with _conn((nsqd.host, nsqd.tcp_port)) as s:
        s.sendall(MAGIC_V2 + data)
        answer = _drain(s, 0.15)
    frames = FrameDecoder()
    frames.feed(answer)
    for frame in frames:  # a malformed frame would raise here
        if frame.is_error:
            assert frame.data.startswith(b"E_"), frame
    status, _ = http("GET", nsqd.url("/ping"))
    assert status == 200

