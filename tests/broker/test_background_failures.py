"""A background loop of nsqd never dies silently: a channel that fails in the queue scan is
logged with its traceback and every other channel keeps its timeouts; a loop that still
ends with an exception stops nsqd the way SIGTERM does (what it holds is written to disk)
and the process exits 1. nsqd runs in this process so a channel can be broken on purpose."""
from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import AsyncIterator, Callable

import pytest

from nsq_protocol import MAGIC_V2, commands
from nsq_protocol.frames import FrameDecoder
from nsq_protocol.message import decode_message
from nsqd import cli
from nsqd.background import FailureLog
from nsqd.nsqd import NSQD
from nsqd.options import NsqdOptions
from nsqd.queue_scan import QueueScanner

DEADLINE = 10.0


def options(path: Path, **flags: object) -> NsqdOptions:
    return NsqdOptions(data_path=str(path), tcp_address="127.0.0.1:0", http_address="127.0.0.1:0", **flags)


class Conn:
    """A raw V2 connection to an in-process nsqd."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.frames = FrameDecoder()

    @classmethod
    async def open(cls, server: NSQD) -> "Conn":
        reader, writer = await asyncio.open_connection("127.0.0.1", server.tcp_port)
        writer.write(MAGIC_V2)
        return cls(reader, writer)

    async def call(self, command: bytes) -> bytes:
        self.writer.write(command)
        return (await self.next_frame()).data

    async def next_frame(self):  # type: ignore[no-untyped-def]
        async with asyncio.timeout(DEADLINE):
            while True:
                frame = self.frames.next_frame()
                if frame is not None:
                    return frame
                chunk = await self.reader.read(65536)
                assert chunk, "nsqd closed the connection"
                self.frames.feed(chunk)

    def close(self) -> None:
        self.writer.close()


@pytest.fixture
async def started() -> AsyncIterator[Callable[[NsqdOptions], "asyncio.Future[NSQD]"]]:
    servers: list[NSQD] = []

    async def start(opts: NsqdOptions) -> NSQD:
        server = NSQD(opts)
        await server.start()
        servers.append(server)
        return server
    yield start  # type: ignore[misc]
    for server in servers:
        await server.stop()


async def test_a_failing_channel_is_logged_and_the_other_channels_still_time_out(
        tmp_path: Path, started: Callable, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    server = await started(options(tmp_path, msg_timeout=0.2, queue_scan_interval=0.02))
    topic = server.get_topic("t")
    broken = topic.get_channel("broken")  # listed first: each pass of the scan visits it first

    def explode(now: float) -> bool:
        raise RuntimeError("channel bug")
    monkeypatch.setattr(broken, "process_in_flight", explode)

    consumer, publisher = await Conn.open(server), await Conn.open(server)
    try:
        assert await consumer.call(commands.sub("t", "good")) == b"OK"
        consumer.writer.write(commands.rdy(1))
        with caplog.at_level(logging.ERROR, logger="nsqd"):
            assert await publisher.call(commands.pub("t", b"times out")) == b"OK"
            first = decode_message((await consumer.next_frame()).data)
            # not finished: the scan must time it out and hand it over again
            again = decode_message((await consumer.next_frame()).data)
        assert (first.id, first.attempts) == (again.id, 1) and again.attempts == 2
        consumer.writer.write(commands.fin(again.id))
        failures = [r for r in caplog.records if "Channel(t:broken)" in r.getMessage()]
        assert failures and failures[0].exc_info is not None
        assert str(failures[0].exc_info[1]) == "channel bug"
        assert not server.exiting
    finally:
        consumer.close()
        publisher.close()


async def test_a_background_loop_that_dies_stops_nsqd_with_what_it_holds_on_disk(
        tmp_path: Path, started: Callable, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    trigger = asyncio.Event()

    async def dying_scan(self: QueueScanner) -> None:
        await trigger.wait()
        raise RuntimeError("scan loop bug")
    monkeypatch.setattr(QueueScanner, "run", dying_scan)
    server = await started(options(tmp_path))
    server.get_topic("t").get_channel("c")
    publisher = await Conn.open(server)
    try:
        assert await publisher.call(commands.pub("t", b"kept")) == b"OK"
    finally:
        publisher.close()
    with caplog.at_level(logging.CRITICAL, logger="nsqd"):
        trigger.set()
        async with asyncio.timeout(DEADLINE):
            await server.wait_stopped()
    assert isinstance(server.fatal_error, RuntimeError) and server.persisted_count == 1
    critical = [r for r in caplog.records if r.levelno == logging.CRITICAL]
    assert critical and critical[0].exc_info is not None and "QUEUESCAN" in critical[0].getMessage()

    monkeypatch.undo()
    restarted = await started(options(tmp_path))
    consumer = await Conn.open(restarted)
    try:
        assert await consumer.call(commands.sub("t", "c")) == b"OK"
        consumer.writer.write(commands.rdy(1))
        assert decode_message((await consumer.next_frame()).data).body == b"kept"
    finally:
        consumer.close()


async def test_the_process_exits_1_when_a_background_loop_dies(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async def dying_scan(self: QueueScanner) -> None:
        raise RuntimeError("scan loop bug")
    monkeypatch.setattr(QueueScanner, "run", dying_scan)
    async with asyncio.timeout(DEADLINE):
        assert await cli.serve(options(tmp_path)) == 1


def test_a_recurring_failure_is_logged_once_per_interval_with_the_count_left_out(
        caplog: pytest.LogCaptureFixture) -> None:
    now = [0.0]
    failures = FailureLog(logging.getLogger("nsqd"), interval=10.0, clock=lambda: now[0])
    with caplog.at_level(logging.ERROR, logger="nsqd"):
        for at in (0.0, 1.0, 2.0, 10.5, 11.0):
            now[0] = at
            for key in ("a", "b"):
                try:
                    raise ValueError(key)
                except ValueError:
                    failures.failed(key, f"step {key} failed")
    assert [r.getMessage() for r in caplog.records] == [
        "step a failed", "step b failed",
        "step a failed (2 more since the last report)", "step b failed (2 more since the last report)"]
    assert all(r.exc_info is not None for r in caplog.records) and failures.count == 10
