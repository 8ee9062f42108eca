"""Consumer against a real nsqd: handlers (return = FIN, raise = REQ), answering later,
TOUCH, concurrency, max_attempts and the give-up hook, heartbeats, reconnection."""
from __future__ import annotations

import asyncio
from typing import Awaitable, Callable

import pytest

from nsq_client import Config, Consumer, Message, MessageAlreadyAnsweredError, Producer
from tests.client.conftest import StartNsqd
from tests.client.helpers import channel_stats, eventually
from tests.client.wire import RecordingProxy
from tests.servers import HOST, Nsqd, free_port

Handler = Callable[[Message], Awaitable[None]]


async def publish(nsqd: Nsqd | str, topic: str, bodies: list[bytes]) -> None:
    address = nsqd if isinstance(nsqd, str) else nsqd.tcp_address
    async with Producer(address) as producer:
        await producer.multi_publish(topic, bodies)


async def start_consumer(address: str, topic: str, handler: Handler, config: Config | None = None,
                         concurrency: int = 1, channel: str = "ch") -> Consumer:
    consumer = Consumer(topic, channel, config or Config(), handler=handler, concurrency=concurrency)
    await consumer.connect_to_nsqd(address)
    return consumer


async def test_returning_finishes_and_raising_requeues_with_the_default_delay(shared_nsqd: Nsqd,
                                                                               topic: str) -> None:
    proxy = await RecordingProxy(HOST, shared_nsqd.tcp_port).start()
    seen: list[tuple[bytes, int]] = []

    async def handler(message: Message) -> None:
        seen.append((message.body, message.attempts))
        if message.body == b"fails once" and message.attempts == 1:
            raise RuntimeError("not yet")

    await publish(shared_nsqd, topic, [b"fine", b"fails once"])
    config = Config(default_requeue_delay=0.2, backoff_multiplier=0.01, max_in_flight=2)
    consumer = await start_consumer(proxy.address, topic, handler, config)
    try:
        await eventually(lambda: len(seen) == 3, message="three deliveries")
        await eventually(lambda: consumer.stats().messages_finished == 2)
    finally:
        await consumer.stop()
        await proxy.close()
    assert sorted(seen) == [(b"fails once", 1), (b"fails once", 2), (b"fine", 1)]
    sent = proxy.connections[0].sent
    requeues = [s for s in sent if s.name == "REQ"]
    # default_requeue_delay times attempts, in milliseconds
    assert len(requeues) == 1 and requeues[0].params[1] == "200"
    assert [s.name for s in sent].count("FIN") == 2
    stats = consumer.stats()
    assert (stats.messages_received, stats.messages_finished, stats.messages_requeued) == (3, 2, 1)


async def test_handlers_may_answer_later_themselves(shared_nsqd: Nsqd, topic: str) -> None:
    held: list[Message] = []

    async def handler(message: Message) -> None:
        message.disable_auto_response()
        held.append(message)

    await publish(shared_nsqd, topic, [b"a", b"b"])
    consumer = await start_consumer(shared_nsqd.tcp_address, topic, handler, Config(max_in_flight=2))
    try:
        await eventually(lambda: len(held) == 2)
        stats = await channel_stats(shared_nsqd, topic, "ch")
        assert stats is not None and stats["in_flight_count"] == 2  # the return answered nothing
        first, second = sorted(held, key=lambda m: m.body)
        first.finish()
        second.requeue(delay=0, backoff=False)
        with pytest.raises(MessageAlreadyAnsweredError):
            first.finish()
        await eventually(lambda: len(held) == 3, message="the requeued message comes back")
        assert held[2].body == b"b" and held[2].attempts == 2
        held[2].finish()
        await eventually(lambda: _channel_settled(shared_nsqd, topic, messages=2, requeued=1))
    finally:
        await consumer.stop()


async def _channel_settled(nsqd: Nsqd, topic: str, messages: int, requeued: int) -> bool:
    stats = await channel_stats(nsqd, topic, "ch")
    return bool(stats and stats["in_flight_count"] == 0 and stats["depth"] == 0
                and stats["requeue_count"] == requeued and stats["message_count"] == messages)


async def test_touch_keeps_a_slow_message_from_timing_out(shared_nsqd: Nsqd, topic: str) -> None:
    deliveries: list[int] = []

    async def slow_handler(message: Message) -> None:
        deliveries.append(message.attempts)
        for _ in range(10):  # 1.5 s of work against a 1 s message timeout, touched often
            await asyncio.sleep(0.15)  # enough that a loaded machine's late wake-up stays inside it
            message.touch()

    await publish(shared_nsqd, topic, [b"slow"])
    consumer = await start_consumer(shared_nsqd.tcp_address, topic, slow_handler, Config(msg_timeout=1.0))
    try:
        await eventually(lambda: consumer.stats().messages_finished == 1, timeout=5)
        stats = await channel_stats(shared_nsqd, topic, "ch")
    finally:
        await consumer.stop()
    assert deliveries == [1]
    assert stats is not None and stats["timeout_count"] == 0 and stats["in_flight_count"] == 0


async def test_concurrency_runs_that_many_handlers_at_once(shared_nsqd: Nsqd, topic: str) -> None:
    running = 0
    peak = 0
    release = asyncio.Event()

    async def handler(message: Message) -> None:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await release.wait()
        running -= 1

    await publish(shared_nsqd, topic, [b"%d" % i for i in range(8)])
    consumer = await start_consumer(shared_nsqd.tcp_address, topic, handler,
                                    Config(max_in_flight=8), concurrency=4)
    try:
        await eventually(lambda: running == 4, message="four handlers busy")
        # nsqd delivered 8 (max_in_flight), only 4 are being handled
        await eventually(lambda: consumer.stats().messages_received == 8)
        assert running == 4
        release.set()
        await eventually(lambda: consumer.stats().messages_finished == 8)
    finally:
        await consumer.stop()
    assert peak == 4


async def test_a_message_over_max_attempts_goes_to_the_give_up_hook_and_is_finished(shared_nsqd: Nsqd,
                                                                                    topic: str) -> None:
    attempts_seen: list[int] = []
    given_up: list[Message] = []

    async def always_fails(message: Message) -> None:
        attempts_seen.append(message.attempts)
        raise RuntimeError("poison")

    async def give_up(message: Message) -> None:
        given_up.append(message)

    await publish(shared_nsqd, topic, [b"poison"])
    config = Config(max_attempts=3, default_requeue_delay=0, backoff_multiplier=0.01)
    consumer = Consumer(topic, "ch", config, handler=always_fails, give_up=give_up)
    await consumer.connect_to_nsqd(shared_nsqd.tcp_address)
    try:
        await eventually(lambda: given_up, message="the give-up hook was called")
        await eventually(lambda: _channel_settled(shared_nsqd, topic, messages=1, requeued=3))
    finally:
        await consumer.stop()
    assert attempts_seen == [1, 2, 3]  # the handler never saw the fourth delivery
    assert given_up[0].attempts == 4 and given_up[0].body == b"poison"
    assert consumer.stats().messages_given_up == 1


async def test_heartbeats_are_answered_so_idle_connections_live(shared_nsqd: Nsqd, topic: str) -> None:
    proxy = await RecordingProxy(HOST, shared_nsqd.tcp_port).start()
    config = Config(heartbeat_interval=1, read_timeout=5)
    got: list[bytes] = []

    async def handler(message: Message) -> None:
        got.append(message.body)

    consumer = await start_consumer(proxy.address, topic, handler, config)
    producer = Producer(proxy.address, config)
    await producer.connect()
    try:
        # nsqd drops a client that sends nothing for two heartbeat intervals
        await eventually(lambda: all(c.names().count("NOP") >= 3 for c in proxy.connections), timeout=8,
                         message="three heartbeats answered on both connections")
        assert len(proxy.open_connections) == 2
        await producer.publish(topic, b"still here")
        await eventually(lambda: got == [b"still here"])
        assert len(proxy.connections) == 2  # no reconnection happened
    finally:
        await producer.stop()
        await consumer.stop()
        await proxy.close()


async def test_a_consumer_reconnects_to_an_nsqd_that_restarts(start_nsqd: StartNsqd, topic: str) -> None:
    nsqd = start_nsqd()
    got: list[bytes] = []

    async def handler(message: Message) -> None:
        got.append(message.body)

    await publish(nsqd, topic, [b"before"])
    consumer = await start_consumer(nsqd.tcp_address, topic, handler,
                                    Config(backoff_multiplier=0.05, lookupd_poll_interval=1))
    try:
        await eventually(lambda: got == [b"before"])
        await asyncio.to_thread(nsqd.stop)
        await eventually(lambda: not consumer.connections, message="the loss is noticed")
        await asyncio.to_thread(nsqd.start)
        await eventually(lambda: consumer.connections, timeout=10, message="reconnected")
        await publish(nsqd, topic, [b"after"])
        await eventually(lambda: got == [b"before", b"after"])
    finally:
        await consumer.stop()


async def test_disconnecting_from_an_nsqd_closes_gracefully_for_good(shared_nsqd: Nsqd, topic: str) -> None:
    proxy = await RecordingProxy(HOST, shared_nsqd.tcp_port).start()

    async def handler(message: Message) -> None:
        pass

    consumer = await start_consumer(proxy.address, topic, handler, Config(backoff_multiplier=0.01))
    try:
        with pytest.raises(ValueError, match="not connected"):
            await consumer.disconnect_from_nsqd(shared_nsqd.tcp_address)
        await consumer.disconnect_from_nsqd(proxy.address)
        assert consumer.connections == [] and proxy.connections[0].names()[-1] == "CLS"
        await publish(shared_nsqd, topic, [b"nobody listens"])
        # nsqd sees the proxy's EOF a little after the consumer has closed its side
        async def nobody_subscribed_and_kept() -> bool:
            stats = await channel_stats(shared_nsqd, topic, "ch")
            return stats is not None and stats["client_count"] == 0 and stats["depth"] == 1
        await eventually(nobody_subscribed_and_kept, message="no client and the message kept")
        assert len(proxy.connections) == 1  # and it did not come back
    finally:
        await consumer.stop()
        await proxy.close()


async def test_a_first_connection_that_fails_raises(shared_nsqd: Nsqd) -> None:
    async def handler(message: Message) -> None:
        pass

    consumer = Consumer("topic", "ch", Config(dial_timeout=1), handler=handler)
    try:
        with pytest.raises(OSError):
            await consumer.connect_to_nsqd(f"{HOST}:{free_port()}")
        assert consumer.connections == []
    finally:
        await consumer.stop()


async def test_connecting_needs_a_handler_and_valid_names(shared_nsqd: Nsqd) -> None:
    with pytest.raises(ValueError, match="topic"):
        Consumer("no spaces allowed", "ch")
    with pytest.raises(ValueError, match="channel"):
        Consumer("topic", "")
    consumer = Consumer("topic", "ch")
    with pytest.raises(RuntimeError, match="handler"):
        await consumer.connect_to_nsqd(shared_nsqd.tcp_address)
    await consumer.stop()
