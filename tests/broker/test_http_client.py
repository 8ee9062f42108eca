"""nsqd's outgoing HTTP client (``nsqd.http_client.HttpClient``, used for lookupd, the auth
server and a drain's handoff): answers from a real nsqd, keep-alive reuse and its
recovery when a server dropped an idle connection (counted on a small server of the
test's own), and every failure (refused, no answer, no connect) an HttpClientError
within its timeout."""
from __future__ import annotations

import asyncio
import socket
import time
from typing import AsyncIterator

import pytest

from nsqd.http_client import HttpClient, HttpClientError
from tests.servers import Nsqd

HOST = "127.0.0.1"


class CountingServer:
    """Answers every GET with its path; counts connections. ``close_after_answer``: drops
    each connection after one answer without saying so (as an idle timeout would)."""

    def __init__(self, *, answer: bool = True, close_after_answer: bool = False) -> None:
        self.connections = 0
        self.answer = answer
        self.close_after_answer = close_after_answer
        self.port = 0
        self._server: asyncio.AbstractServer | None = None

    async def start(self) -> "CountingServer":
        self._server = await asyncio.start_server(self._serve, HOST, 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                if not self.answer:
                    await reader.read()  # holds the request unanswered until the client leaves
                    return
                path = head.split(b" ")[1]
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(path), path))
                await writer.drain()
                if self.close_after_answer:
                    return
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def close(self) -> None:
        assert self._server is not None
        self._server.close()

    async def __aenter__(self) -> "CountingServer":
        return await self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()


@pytest.fixture
async def client() -> AsyncIterator[HttpClient]:
    http = HttpClient(connect_timeout=0.5, request_timeout=0.5)
    yield http
    await http.close()


async def test_publishes_to_a_real_nsqd_and_reads_its_answers(nsqd: Nsqd, topic: str, client: HttpClient) -> None:
    answer = await client.request("POST", nsqd.url("/pub"), params={"topic": topic}, body=b"hello")
    assert (answer.status, answer.body) == (200, b"OK")
    stats = await client.request("GET", nsqd.url(f"/stats?format=json&topic={topic}"))
    assert stats.json()["topics"][0]["depth"] == 1
    refused = await client.request("POST", nsqd.url("/pub"), params={"topic": "bad name!"}, body=b"x")
    assert (refused.status, refused.json()) == (400, {"message": "INVALID_TOPIC"})


async def test_requests_to_one_server_share_a_connection(client: HttpClient) -> None:
    async with CountingServer() as server:
        answers = [await client.request("GET", f"http://{HOST}:{server.port}/n{i}") for i in range(5)]
        assert [a.body for a in answers] == [b"/n%d" % i for i in range(5)]
        assert server.connections == 1


async def test_a_connection_the_server_dropped_meanwhile_is_replaced(client: HttpClient) -> None:
    async with CountingServer(close_after_answer=True) as server:
        for i in range(3):
            assert (await client.request("GET", f"http://{HOST}:{server.port}/x{i}")).body == b"/x%d" % i
        assert server.connections == 3


async def test_a_server_that_never_answers_times_out(client: HttpClient) -> None:
    async with CountingServer(answer=False) as server:
        started = time.monotonic()
        with pytest.raises(HttpClientError, match="no answer within 0.5s"):
            await client.request("POST", f"http://{HOST}:{server.port}/mpub", body=b"x" * 100)
        assert 0.45 <= time.monotonic() - started < 3.0


async def test_a_refused_connection_fails_at_once(client: HttpClient) -> None:
    with socket.socket() as s:
        s.bind((HOST, 0))
        port = s.getsockname()[1]  # bound, not listening: refused
        started = time.monotonic()
        with pytest.raises(HttpClientError):
            await client.request("GET", f"http://{HOST}:{port}/ping")
        assert time.monotonic() - started < 0.45


async def test_a_connect_that_hangs_times_out_at_the_connect_timeout() -> None:
    """A listener whose accept queue is full drops new SYNs: the connect hangs (Linux)."""
    http = HttpClient(connect_timeout=0.3, request_timeout=5.0)
    with socket.socket() as full:
        full.bind((HOST, 0))
        full.listen(0)
        port = full.getsockname()[1]
        fillers = []
        try:
            for _ in range(8):  # fill the queue; later ones may already hang, without blocking us
                filler = socket.socket()
                filler.setblocking(False)
                filler.connect_ex((HOST, port))
                fillers.append(filler)
            await asyncio.sleep(0)
            started = time.monotonic()
            with pytest.raises(HttpClientError, match="no answer within 0.3s"):
                await http.request("GET", f"http://{HOST}:{port}/ping")
            assert time.monotonic() - started < 2.0
        finally:
            for filler in fillers:
                filler.close()
            await http.close()


async def test_urls_that_are_not_http_are_refused(client: HttpClient) -> None:
    for url in ("ftp://x/y", "http:///nohost", f"http://{HOST}:notaport/"):
        with pytest.raises(HttpClientError):
            await client.request("GET", url)
