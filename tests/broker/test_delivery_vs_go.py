"""Who gets a message when there is not room for everything: each case runs against our
nsqd and against Go's v1.3.0 (the ``nsqd_ref`` run), so a difference cannot come back.

- A consumer waiting with RDY room gets a message before a full memory queue of an
  ephemeral channel drops it (``nsq_tail`` on a ``--mem-queue-size=0`` nsqd).
- A consumer with ``sample_rate`` takes its turn and keeps (rate+1)% of what it is handed;
  it does not drain the channel at the expense of the other consumers.
"""
from __future__ import annotations

import shutil
import subprocess
import time
import uuid
from pathlib import Path
from typing import Iterator

import pytest

from tests.broker.wire import Silent, WireConn
from tests.client.conftest import module_flavour, nsqd_starter  # noqa: F401  (module_flavour: a fixture)
from tests.conftest import Servers
from tests.servers import Nsqd

NSQ_TAIL = Path(__file__).resolve().parents[3] / "shared" / "nsq-v1.3.0" / "bin" / "nsq_tail"


def _start(servers: Servers, flavour: str, **flags: object) -> Nsqd:
    data = servers.root / f"data-{uuid.uuid4().hex[:8]}"
    data.mkdir()  # Go's nsqd does not create its data path
    return nsqd_starter(servers, flavour)(data_path=str(data), **flags)


@pytest.fixture(scope="module")
def no_memory(module_flavour: str, module_servers: Servers) -> Nsqd:  # noqa: F811
    return _start(module_servers, module_flavour, mem_queue_size=0)


@pytest.fixture(scope="module")
def small_memory(module_flavour: str, module_servers: Servers) -> Nsqd:  # noqa: F811
    return _start(module_servers, module_flavour, mem_queue_size=5)


@pytest.fixture
def conns() -> Iterator[list[WireConn]]:
    opened: list[WireConn] = []
    yield opened
    for conn in opened:
        conn.sock.close()


def consumer(server: Nsqd, opened: list[WireConn], topic: str, channel: str, rdy: int,
             identify: dict | None = None) -> WireConn:
    conn = WireConn(server.tcp_address)
    opened.append(conn)
    if identify is not None:
        conn.identify(identify)
        conn.expect_ok()
    conn.sub(topic, channel)
    conn.expect_ok()
    conn.rdy(rdy)
    return conn


def publisher(server: Nsqd, opened: list[WireConn]) -> WireConn:
    conn = WireConn(server.tcp_address)
    opened.append(conn)
    return conn


def finish_until_settled(server: Nsqd, consumers: list[WireConn], topic: str, channel: str,
                         timeout: float = 20.0) -> list[int]:
    """FIN whatever each consumer receives until the channel holds nothing, queued or in
    flight; how many messages each consumer got."""
    got = [0] * len(consumers)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for i, conn in enumerate(consumers):
            while True:
                try:
                    msg = conn.read_message(0.02)
                except Silent:
                    break
                conn.fin(msg.id)
                got[i] += 1
        stats = server.channel(topic, channel)
        if stats is not None and stats["depth"] == 0 and stats["in_flight_count"] == 0:
            return got
    raise AssertionError(f"{topic}/{channel} still holds messages after {timeout}s (got {got})")


def test_zero_memory_queue_hands_each_message_to_the_waiting_tail(no_memory: Nsqd, conns: list[WireConn]) -> None:
    topic = f"p-{uuid.uuid4().hex[:8]}"
    tail = consumer(no_memory, conns, topic, "tail#ephemeral", rdy=5)
    pub = publisher(no_memory, conns)
    for i in range(5):
        pub.pub(topic, b"message %d" % i)
        pub.expect_ok()
    assert [m.body for m in tail.read_messages(5)] == [b"message %d" % i for i in range(5)]


@pytest.mark.skipif(not NSQ_TAIL.is_file() or shutil.which("timeout") is None,
                    reason="Go's nsq_tail is not in ../shared/nsq-v1.3.0")
def test_nsq_tail_prints_what_is_published_on_a_zero_memory_nsqd(no_memory: Nsqd, conns: list[WireConn]) -> None:
    topic = f"p-{uuid.uuid4().hex[:8]}"
    tail = subprocess.Popen(["timeout", "30", str(NSQ_TAIL), f"--nsqd-tcp-address={no_memory.tcp_address}",
                             f"--topic={topic}", "-n", "3"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        def subscribed() -> bool:
            t = no_memory.topic(topic)
            return t is not None and any(c["clients"] for c in t["channels"])
        deadline = time.monotonic() + 20
        while not subscribed():
            assert time.monotonic() < deadline, "nsq_tail never subscribed"
            time.sleep(0.02)
        pub = publisher(no_memory, conns)
        for i in range(3):
            pub.pub(topic, b"tailed %d" % i)
            pub.expect_ok()
        out, _ = tail.communicate(timeout=30)
    finally:
        tail.kill()
        tail.wait()
    assert out.splitlines() == [b"tailed 0", b"tailed 1", b"tailed 2"]


def test_overflow_of_a_small_memory_queue_goes_to_the_waiting_consumer_first(
        small_memory: Nsqd, conns: list[WireConn]) -> None:
    topic = f"p-{uuid.uuid4().hex[:8]}"
    tail = consumer(small_memory, conns, topic, "tail#ephemeral", rdy=20)
    pub = publisher(small_memory, conns)
    pub.mpub(topic, [b"m%d" % i for i in range(50)])
    pub.expect_ok()
    (got,) = finish_until_settled(small_memory, [tail], topic, "tail#ephemeral")
    # more than the 5 the memory queue holds, at most those plus the 20 the consumer had room for
    assert 5 < got <= 25


def test_a_sampling_consumer_takes_its_turn_and_leaves_the_rest(
        small_memory: Nsqd, conns: list[WireConn]) -> None:
    topic = f"s-{uuid.uuid4().hex[:8]}"
    sampler = consumer(small_memory, conns, topic, "c", rdy=200, identify={"sample_rate": 1})
    plain = consumer(small_memory, conns, topic, "c", rdy=200)
    pub = publisher(small_memory, conns)
    pub.mpub(topic, [b"m%d" % i for i in range(200)])
    pub.expect_ok()
    sampled, delivered = finish_until_settled(small_memory, [sampler, plain], topic, "c")
    # the sampler keeps ~2% of the messages it is handed and drops the rest; handed
    # about every other one, it must not leave the plain consumer a handful
    assert delivered >= 40 and sampled + delivered <= 200


@pytest.mark.parametrize("rate, low, high", [(99, 400, 400), (1, 1, 30)])
def test_sample_rate_keeps_rate_plus_one_percent(small_memory: Nsqd, conns: list[WireConn],
                                                 rate: int, low: int, high: int) -> None:
    topic = f"r-{uuid.uuid4().hex[:8]}"
    sampler = consumer(small_memory, conns, topic, "c", rdy=400, identify={"sample_rate": rate})
    pub = publisher(small_memory, conns)
    pub.mpub(topic, [b"m%d" % i for i in range(400)])
    pub.expect_ok()
    (got,) = finish_until_settled(small_memory, [sampler], topic, "c")
    assert low <= got <= high  # rate 99: every one of 400; rate 1: ~8 (2%)
