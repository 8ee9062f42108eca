"""--busy-poll-window: after TCP input nsqd's event loop keeps polling instead of sleeping
for the window, then goes quiet; publishing answers the same with it on or off."""
from __future__ import annotations

import asyncio
import http.client
import os
import time
from typing import Callable

import pytest

from nsq_protocol.http_api import Reply
from nsqd.busy_poll import BusyPoller
from nsqd.http_server import HttpRequest, HttpServer
from tests.broker.conftest import Connect
from tests.conftest import Servers
from tests.servers import Nsqd, wait_for


class FakeLoop:
    """Collects call_soon callbacks; ``turn`` runs the ones scheduled before it, like a loop turn."""

    def __init__(self) -> None:
        self.ready: list[Callable[[], None]] = []

    def call_soon(self, callback: Callable[[], None]) -> None:
        self.ready.append(callback)

    def turn(self) -> None:
        ready, self.ready = self.ready, []
        for callback in ready:
            callback()


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def poller_parts() -> tuple[FakeLoop, Clock, BusyPoller]:
    loop, clock = FakeLoop(), Clock()
    return loop, clock, BusyPoller(loop, 50e-6, clock=clock)  # type: ignore[arg-type]


def test_input_keeps_a_callback_ready_until_the_window_passes(poller_parts: tuple[FakeLoop, Clock, BusyPoller]) -> None:
    loop, clock, poller = poller_parts
    poller.poke()
    for _ in range(5):  # loop turns within the window: always something ready, so no sleep
        assert loop.ready
        loop.turn()
        clock.now += 5e-6
    clock.now += 50e-6
    loop.turn()
    assert not loop.ready and not poller.spinning


def test_input_during_the_window_extends_it(poller_parts: tuple[FakeLoop, Clock, BusyPoller]) -> None:
    loop, clock, poller = poller_parts
    poller.poke()
    loop.turn()
    clock.now += 40e-6
    poller.poke()
    loop.turn()
    clock.now += 40e-6  # 80 us after the first input, 40 after the second
    loop.turn()
    assert loop.ready
    clock.now += 20e-6
    loop.turn()
    assert not loop.ready


def test_many_reads_in_one_turn_schedule_one_callback(poller_parts: tuple[FakeLoop, Clock, BusyPoller]) -> None:
    loop, _, poller = poller_parts
    for _ in range(10):
        poller.poke()
    assert len(loop.ready) == 1


def test_quiet_again_after_the_window_and_woken_by_the_next_input(poller_parts: tuple[FakeLoop, Clock, BusyPoller]) -> None:
    loop, clock, poller = poller_parts
    poller.poke()
    loop.turn()
    clock.now += 1.0
    loop.turn()
    assert not poller.spinning
    poller.poke()
    assert poller.spinning and len(loop.ready) == 1


def _cpu_seconds(server: Nsqd) -> float:
    assert server.proc is not None
    with open(f"/proc/{server.proc.pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _wait_until_idle(server: Nsqd) -> None:
    samples: list[tuple[float, float]] = []  # (wall clock, nsqd's CPU seconds)

    def quiet_for_a_second() -> bool:
        now = time.monotonic()
        samples.append((now, _cpu_seconds(server)))
        second_ago = [cpu for at, cpu in samples if now - at >= 1.0]
        # a loop that kept spinning would use the whole second; an idle nsqd only wakes for
        # its queue scan every 100ms and its connection's timers
        return bool(second_ago) and samples[-1][1] - second_ago[-1] < 0.25

    wait_for(quiet_for_a_second, timeout=15, interval=0.1, message="nsqd idle: under 0.25s of CPU in a second")


@pytest.mark.parametrize("window", ["50us", "0"])
def test_pub_one_at_a_time_then_an_idle_nsqd_uses_no_cpu(servers: Servers, connect: Connect, topic: str,
                                                         window: str) -> None:
    server = servers.nsqd(busy_poll_window=window)
    conn = connect(server)
    for i in range(500):
        conn.pub(topic, b"m%d" % i)
        conn.expect_ok()
    assert server.topic(topic)["message_count"] == 500  # type: ignore[index]
    _wait_until_idle(server)


@pytest.mark.parametrize("window", ["50us", "0"])
def test_http_pub_one_at_a_time_then_an_idle_nsqd_uses_no_cpu(servers: Servers, topic: str, window: str) -> None:
    server = servers.nsqd(busy_poll_window=window)
    conn = http.client.HTTPConnection(server.host, server.http_port, timeout=10)
    try:
        for i in range(500):
            conn.request("POST", f"/pub?topic={topic}", body=b"m%d" % i)
            answer = conn.getresponse()
            assert (answer.status, answer.read()) == (200, b"OK")
    finally:
        conn.close()
    assert server.topic(topic)["message_count"] == 500  # type: ignore[index]
    _wait_until_idle(server)


async def test_the_http_server_reports_every_read_to_its_input_hook() -> None:
    """nsqd hands its busy poller's ``poke`` to the HTTP server: a client that waits for
    each answer then gets the next one without the loop going to sleep in between."""
    reads = 0

    def on_input() -> None:
        nonlocal reads
        reads += 1

    async def handle(request: HttpRequest) -> Reply:
        return Reply(200, b"OK", {"Content-Type": "text/plain"})

    server = HttpServer(handle, on_input=on_input)
    listener = await server.listen("127.0.0.1", 0)
    reader, writer = await asyncio.open_connection("127.0.0.1", listener.sockets[0].getsockname()[1])
    try:
        for expected_reads in (1, 2, 3):
            writer.write(b"POST /pub?topic=t HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\nm")
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
            assert head.startswith(b"HTTP/1.1 200")
            assert await reader.readexactly(2) == b"OK"
            assert reads == expected_reads
    finally:
        writer.close()
        await server.close(grace=1.0)
