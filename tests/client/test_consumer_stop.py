"""Graceful stop as the protocol intends (CLS, CLOSE_WAIT, in-flight answered, close), its
deadline, and SIGTERM wired to it in a real process."""
from __future__ import annotations

import asyncio
import json
import random
import signal
import sys
import time
from pathlib import Path

from nsq_client import Config, Consumer, Message, Producer
from tests.client.conftest import StartNsqd
from tests.client.helpers import channel_stats, eventually
from tests.client.wire import RecordingProxy
from tests.servers import HOST, Nsqd

ROOT = Path(__file__).resolve().parents[2]


async def test_graceful_stop_under_load_answers_everything_and_loses_nothing(start_nsqd: StartNsqd,
                                                                              topic: str) -> None:
    nsqd = start_nsqd()
    proxy = await RecordingProxy(HOST, nsqd.tcp_port).start()
    producer = Producer(nsqd.tcp_address)
    bodies = [b"m%05d" % i for i in range(3000)]
    await producer.multi_publish(topic, bodies[:2000])

    async def keep_publishing() -> None:  # load continues while the consumer stops
        for start in range(2000, 3000, 50):
            await producer.multi_publish(topic, bodies[start:start + 50])
            await asyncio.sleep(0.005)

    first: list[bytes] = []

    async def handler(message: Message) -> None:
        await asyncio.sleep(random.random() * 0.002)
        first.append(message.body)

    consumer = Consumer(topic, "ch", Config(max_in_flight=50), handler=handler, concurrency=10)
    await consumer.connect_to_nsqd(proxy.address)
    publishing = asyncio.create_task(keep_publishing())
    await eventually(lambda: len(first) >= 500, message="consuming under load")
    started = time.monotonic()
    await consumer.stop(timeout=10)
    stop_took = time.monotonic() - started
    await publishing
    await producer.stop()

    assert consumer.stopped.done() and stop_took < 5
    stats = consumer.stats()
    assert stats.messages_received == stats.messages_finished == len(first) and stats.connections == 0
    wire = proxy.connections[0]
    names = wire.names()
    assert names.count("CLS") == 1 and names[-1] != "CLS"
    # what was in flight when CLS went out was still answered after it
    assert set(names[names.index("CLS") + 1:]) <= {"FIN", "NOP"}
    assert names.count("FIN") == len(first)
    await eventually(lambda: wire.closed, message="the client closed the connection")
    channel = await channel_stats(nsqd, topic, "ch")
    assert channel is not None and channel["in_flight_count"] == 0 and channel["timeout_count"] == 0
    await proxy.close()

    rest: list[bytes] = []

    async def collect(message: Message) -> None:
        rest.append(message.body)

    drain = Consumer(topic, "ch", Config(max_in_flight=200), handler=collect)
    await drain.connect_to_nsqd(nsqd.tcp_address)
    await eventually(lambda: len(first) + len(rest) >= len(bodies), message="every message consumed")
    await drain.stop()
    assert sorted(first + rest) == bodies  # none lost, none delivered twice


async def test_stop_forces_the_exit_after_its_deadline(shared_nsqd: Nsqd, topic: str) -> None:
    stuck = asyncio.Event()
    cancelled = asyncio.Event()

    async def hangs(message: Message) -> None:
        stuck.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    async with Producer(shared_nsqd.tcp_address) as producer:
        await producer.publish(topic, b"never answered")
    consumer = Consumer(topic, "ch", handler=hangs)
    await consumer.connect_to_nsqd(shared_nsqd.tcp_address)
    async with asyncio.timeout(5):
        await stuck.wait()
    started = time.monotonic()
    await consumer.stop(timeout=0.5)
    assert 0.5 <= time.monotonic() - started < 2
    assert consumer.stopped.done() and cancelled.is_set() and not consumer.connections
    channel = await channel_stats(shared_nsqd, topic, "ch")
    # never answered: nsqd holds it in flight until its timeout, then delivers it again
    assert channel is not None and channel["in_flight_count"] == 1


async def test_stop_without_connections_returns_at_once_and_twice_is_harmless(shared_nsqd: Nsqd,
                                                                                topic: str) -> None:
    async def handler(message: Message) -> None:
        pass

    idle = Consumer(topic, "ch", handler=handler)
    async with asyncio.timeout(1):
        await idle.stop()
    async with Consumer(topic, "ch", handler=handler) as consumer:
        await consumer.connect_to_nsqd(shared_nsqd.tcp_address)
        assert consumer.connections == [shared_nsqd.tcp_address]
    assert consumer.stopped.done() and not consumer.connections
    async with asyncio.timeout(1):
        await consumer.stop()


async def test_sigterm_stops_a_consumer_process_gracefully(shared_nsqd: Nsqd, topic: str) -> None:
    async with Producer(shared_nsqd.tcp_address) as producer:
        await producer.multi_publish(topic, [b"%d" % i for i in range(200)])
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tests.client.signal_consumer", shared_nsqd.tcp_address, topic,
        cwd=ROOT, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    try:
        assert process.stdout is not None
        async with asyncio.timeout(15):
            line = await process.stdout.readline()
        assert line.strip() == b"ready"
        process.send_signal(signal.SIGTERM)
        async with asyncio.timeout(15):
            out, err = await process.communicate()
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert process.returncode == 0, err.decode()
    report = json.loads(out.decode().strip().splitlines()[-1])
    assert report["signal"] == "SIGTERM" and report["connections"] == 0
    assert report["received"] == report["finished"] > 0 and report["requeued"] == 0
    channel = await channel_stats(shared_nsqd, topic, "ch")
    assert channel is not None and channel["in_flight_count"] == 0
    assert channel["depth"] == 200 - report["finished"]
