"""Producer against a real nsqd: PUB/MPUB/DPUB awaited and pipelined, answers matched to
commands in order, errors from nsqd, ping, and a stop that never leaves a publish hanging."""
from __future__ import annotations

import asyncio
import signal
import time

import pytest

from nsq_client import (
    Config,
    ConnectionClosedError,
    Consumer,
    Message,
    NotConnectedError,
    Producer,
    ProducerStoppedError,
    ServerError,
)
from tests.client.conftest import StartNsqd, nsqd_starter
from tests.conftest import Servers
from tests.client.helpers import eventually, topic_message_count
from tests.client.scripted import TCP_CLOSE, TCP_CLOSE_WAIT, client_socket, tcp_state, unread_bytes
from tests.servers import Nsqd, wait_for


@pytest.fixture(scope="module")
def small_nsqd(module_flavour: str, module_servers: Servers) -> Nsqd:
    """An nsqd that refuses messages over 100 bytes."""
    return nsqd_starter(module_servers, module_flavour)(max_msg_size=100)


async def consume(nsqd: Nsqd, topic: str, count: int, timeout: float = 10.0) -> list[Message]:
    """Receive ``count`` messages from ``topic`` on a fresh channel, FIN them, stop."""
    got: list[Message] = []
    consumer = Consumer(topic, "check", Config(max_in_flight=100), handler=_collect_into(got))
    await consumer.connect_to_nsqd(nsqd.tcp_address)
    try:
        await eventually(lambda: len(got) >= count, timeout, f"{count} messages received")
    finally:
        await consumer.stop()
    return got


def _collect_into(got: list[Message]):  # type: ignore[no-untyped-def]
    async def handler(message: Message) -> None:
        got.append(message)
    return handler


async def test_publish_multi_publish_and_deferred_publish_are_delivered(shared_nsqd: Nsqd, topic: str) -> None:
    async with Producer(shared_nsqd.tcp_address) as producer:
        await producer.publish(topic, b"one")
        await producer.multi_publish(topic, [b"two", b"three"])
        published_at = time.monotonic()
        await producer.deferred_publish(topic, 0.5, b"later")
    got = await consume(shared_nsqd, topic, 4)
    assert sorted(m.body for m in got) == [b"later", b"one", b"three", b"two"]
    later = next(m for m in got if m.body == b"later")
    assert later.attempts == 1 and len(later.id) == 16
    # the deferred message arrived last (the channel was created after the publishes)
    assert got[-1].body == b"later"
    assert time.monotonic() - published_at >= 0.5


async def test_pipelined_publishes_on_one_connection_are_all_acknowledged(shared_nsqd: Nsqd, topic: str) -> None:
    async with Producer(shared_nsqd.tcp_address) as producer:
        answers = [producer.publish_nowait(topic, b"m%d" % i) for i in range(2000)]
        assert producer.pending_count == 2000
        await asyncio.gather(*answers)
        assert producer.pending_count == 0
    assert await topic_message_count(shared_nsqd, topic) == 2000


async def test_answers_are_matched_in_order_around_a_refused_command(small_nsqd: Nsqd, topic: str) -> None:
    nsqd = small_nsqd
    async with Producer(nsqd.tcp_address) as producer:
        await producer.connect()
        accepted = [producer.publish_nowait(topic, b"ok-%d" % i) for i in range(5)]
        too_big = producer.publish_nowait(topic, b"x" * 101)
        results = await asyncio.gather(*accepted, too_big, return_exceptions=True)
    assert results[:5] == [None] * 5
    assert isinstance(results[5], ServerError) and results[5].code == "E_BAD_MESSAGE"
    assert "101 > 100" in str(results[5])
    assert await topic_message_count(nsqd, topic) == 5


async def test_commands_behind_a_fatal_error_are_failed_not_acknowledged(small_nsqd: Nsqd, topic: str) -> None:
    """Issue 36: nsqd answers two PUBs, refuses the third (fatal: it closes) and resets
    the write that follows; the client's loop is held until that write has failed, so it
    reads every answer after the failure, and must still report the two as accepted."""
    await check_commands_behind_a_fatal_error(small_nsqd, topic, Config())


async def check_commands_behind_a_fatal_error(nsqd: Nsqd, topic: str, config: Config) -> None:
    """The test above with ``config`` (TLS, compression: test_tls_and_compression.py), against
    an nsqd refusing messages over 100 bytes."""
    async with Producer(nsqd.tcp_address, config) as producer:
        await producer.connect()
        conn = producer._conn
        assert conn is not None
        sock = client_socket(conn)
        sent = [producer.publish_nowait(topic, b"ok-0"), producer.publish_nowait(topic, b"ok-1"),
                producer.publish_nowait(topic, b"x" * 101)]
        state = wait_for(lambda: _closed_state(sock), message="nsqd closed the connection")
        behind = [producer.publish_nowait(topic, b"late-0")]
        if state == TCP_CLOSE_WAIT:  # a FIN: that write went out, and nsqd answers it with a reset
            wait_for(lambda: tcp_state(sock) == TCP_CLOSE, message="nsqd reset the connection")
            behind.append(producer.publish_nowait(topic, b"late-1"))
        assert unread_bytes(sock) > 0  # the answers are still in the socket
        results = await asyncio.gather(*sent, *behind, return_exceptions=True)
    assert results[:2] == [None, None]
    # closing with commands unread on its side, nsqd may reset at once, discarding the
    # error frame it had not sent yet
    assert isinstance(results[2], (ServerError, ConnectionClosedError))
    assert all(isinstance(r, ConnectionClosedError) for r in results[3:-1])
    assert isinstance(results[-1], NotConnectedError)  # the write that failed: never sent
    assert await topic_message_count(nsqd, topic) == 2


def _closed_state(sock: object) -> int:
    state = tcp_state(sock)
    return state if state in (TCP_CLOSE_WAIT, TCP_CLOSE) else 0


async def test_a_producer_reconnects_after_nsqd_closed_its_connection(small_nsqd: Nsqd, topic: str) -> None:
    nsqd = small_nsqd
    async with Producer(nsqd.tcp_address) as producer:
        with pytest.raises((ServerError, ConnectionClosedError)):
            await producer.publish(topic, b"x" * 101)
        await producer.publish(topic, b"fine")
        with pytest.raises((ServerError, ConnectionClosedError)):
            await producer.multi_publish(topic, [b"a", b"y" * 101])
        await producer.deferred_publish(topic, 0, b"also fine")
    assert await topic_message_count(nsqd, topic) == 2


async def test_bad_arguments_fail_before_anything_is_sent(shared_nsqd: Nsqd) -> None:
    async with Producer(shared_nsqd.tcp_address) as producer:
        with pytest.raises(ValueError, match="topic"):
            await producer.publish("bad topic!", b"x")
        with pytest.raises(ValueError, match="empty"):
            await producer.publish("fine", b"")
        with pytest.raises(ValueError, match="at least one"):
            await producer.multi_publish("fine", [])
        with pytest.raises(ValueError, match="delay"):
            await producer.deferred_publish("fine", -1, b"x")
        assert not producer.is_connected


async def test_ping_connects_and_fails_when_nsqd_is_unreachable(shared_nsqd: Nsqd) -> None:
    producer = Producer(shared_nsqd.tcp_address)
    await producer.ping()
    assert producer.is_connected
    await producer.stop()
    nobody = Producer("127.0.0.1:1", Config(dial_timeout=1))
    with pytest.raises(OSError):
        await nobody.ping()
    await nobody.stop()


async def test_stop_fails_unanswered_publishes_instead_of_hanging(small_nsqd: Nsqd, topic: str) -> None:
    nsqd = small_nsqd
    producer = Producer(nsqd.tcp_address, Config(read_timeout=30, heartbeat_interval=10))
    await producer.publish(topic, b"answered")
    await asyncio.to_thread(nsqd.freeze)  # nsqd reads nothing and answers nothing until SIGCONT
    try:
        waiting = [producer.publish_nowait(topic, b"m%d" % i) for i in range(10)]
        done, _ = await asyncio.wait(waiting, timeout=0.3)
        assert not done  # really waiting on nsqd
        started = time.monotonic()
        await producer.stop()
        assert time.monotonic() - started < 2
        results = await asyncio.gather(*waiting, return_exceptions=True)
        assert all(isinstance(r, ProducerStoppedError) for r in results)
        assert "stopped before nsqd answered" in str(results[0])
        with pytest.raises(ProducerStoppedError):
            await producer.publish(topic, b"after stop")
    finally:
        nsqd.signal(signal.SIGCONT)


async def test_publishes_fail_with_connection_closed_when_nsqd_goes_away(start_nsqd: StartNsqd, topic: str) -> None:
    nsqd = start_nsqd()
    async with Producer(nsqd.tcp_address) as producer:
        await producer.publish(topic, b"before")
        nsqd.kill()
        with pytest.raises((ConnectionClosedError, OSError)):
            for i in range(100):  # the first writes may still be accepted by the kernel
                await producer.publish(topic, b"after %d" % i)
        assert not producer.is_connected


async def test_publishes_submitted_before_the_connection_exists_go_out_in_order(shared_nsqd: Nsqd,
                                                                               topic: str) -> None:
    bodies = [b"early-%05d" % i for i in range(3000)]
    async with Producer(shared_nsqd.tcp_address) as producer:
        assert not producer.is_connected
        answers = [producer.publish_nowait(topic, body) for body in bodies]
        await asyncio.gather(*answers)
        assert producer.is_connected
    got: list[bytes] = []

    async def in_order(message: Message) -> None:
        got.append(message.body)

    consumer = Consumer(topic, "ordered", Config(max_in_flight=1), handler=in_order)
    await consumer.connect_to_nsqd(shared_nsqd.tcp_address)
    try:
        await eventually(lambda: len(got) == len(bodies), timeout=20)
    finally:
        await consumer.stop()
    assert got == bodies  # one connection, one memory queue, one message at a time: FIFO
