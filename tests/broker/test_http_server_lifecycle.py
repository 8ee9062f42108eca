"""nsqd's HTTP server (``nsqd.http_server.HttpServer``) in this process, where its timeouts
can be short: idle keep-alive connections and stalled requests are closed after the idle
timeout, and ``close()`` drops idle connections at once, lets a running request finish
(its answer closing the connection), refuses new ones and cancels what outlives the grace."""
from __future__ import annotations

import asyncio
import time
from typing import AsyncIterator

import pytest

from nsq_protocol.http_api import Reply
from nsqd.http_server import HttpRequest, HttpServer

IDLE = 0.3


class App:
    """A handler that answers at once, or holds ``/slow`` until released."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.slow_started = asyncio.Event()
        self.cancelled = False

    async def handle(self, request: HttpRequest) -> Reply:
        if request.path == "/slow":
            self.slow_started.set()
            try:
                await self.release.wait()
            except asyncio.CancelledError:
                self.cancelled = True
                raise
        body = await request.read_body(1024)
        return Reply(200, b"done " + (body or b""), {"Content-Type": "text/plain"})


@pytest.fixture
async def served() -> AsyncIterator[tuple[HttpServer, App, int]]:
    app = App()
    server = HttpServer(app.handle, idle_timeout=IDLE)
    listener = await server.listen("127.0.0.1", 0)
    yield server, app, listener.sockets[0].getsockname()[1]
    app.release.set()
    await server.close(grace=1.0)


async def read_answer(reader: asyncio.StreamReader) -> bytes:
    head = await reader.readuntil(b"\r\n\r\n")
    length = int(head.split(b"Content-Length: ")[1].split(b"\r\n")[0])
    return head + await reader.readexactly(length)


async def closed_after(reader: asyncio.StreamReader, limit: float = 5.0) -> float:
    """Seconds until the server closes the connection (nothing more may arrive)."""
    started = time.monotonic()
    async with asyncio.timeout(limit):
        assert await reader.read() == b""
    return time.monotonic() - started


async def test_an_idle_keep_alive_connection_is_closed_after_the_timeout(served) -> None:  # type: ignore[no-untyped-def]
    _, _, port = served
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET /a HTTP/1.1\r\nHost: x\r\n\r\n")
    assert (await read_answer(reader)).endswith(b"done ")
    assert IDLE * 0.9 <= await closed_after(reader)
    writer.close()


async def test_a_request_stalled_mid_way_is_dropped_after_the_timeout(served) -> None:  # type: ignore[no-untyped-def]
    _, _, port = served
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc")  # 7 bytes short
    assert IDLE * 0.9 <= await closed_after(reader)
    writer.close()


async def test_close_drops_idle_connections_finishes_running_requests_and_refuses_new_ones(served) -> None:  # type: ignore[no-untyped-def]
    server, app, port = served
    idle_reader, idle_writer = await asyncio.open_connection("127.0.0.1", port)
    idle_writer.write(b"GET /a HTTP/1.1\r\nHost: x\r\n\r\n")
    await read_answer(idle_reader)
    busy_reader, busy_writer = await asyncio.open_connection("127.0.0.1", port)
    busy_writer.write(b"GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
    await app.slow_started.wait()

    closing = asyncio.create_task(server.close(grace=10.0))
    assert await closed_after(idle_reader, 1.0) < 1.0  # not left to its idle timeout
    with pytest.raises(OSError):
        await asyncio.open_connection("127.0.0.1", port)
    assert not closing.done()  # waiting for /slow
    app.release.set()
    answer = await read_answer(busy_reader)
    assert answer.startswith(b"HTTP/1.1 200 OK\r\n") and b"Connection: close\r\n" in answer
    assert await closed_after(busy_reader) < 5.0
    await asyncio.wait_for(closing, 5.0)
    assert not app.cancelled
    for writer in (idle_writer, busy_writer):
        writer.close()


async def test_close_cancels_a_request_that_outlives_the_grace(served) -> None:  # type: ignore[no-untyped-def]
    server, app, port = served
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
    await app.slow_started.wait()
    started = time.monotonic()
    await server.close(grace=0.2)
    assert app.cancelled and time.monotonic() - started < 2.0
    assert await reader.read() == b""  # closed without an answer
    writer.close()
