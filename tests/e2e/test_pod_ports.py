"""A pod's stable port: each connection reaches wherever the pod's process listens now,
and is refused (closed at once) while the pod has none."""
from __future__ import annotations

import asyncio
from typing import Any, AsyncIterator

import pytest_asyncio

from e2e.pod_ports import PodPorts


class Book:
    def __init__(self) -> None:
        self.entries: dict[str, dict[str, Any]] = {}

    def pods(self) -> dict[str, dict[str, Any]]:
        return dict(self.entries)


@pytest_asyncio.fixture
async def echo_servers() -> AsyncIterator[list[asyncio.Server]]:
    """Two servers that answer each line with their own name and the line."""
    def serve(name: bytes) -> Any:
        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            while line := await reader.readline():
                writer.write(name + b" " + line)
                await writer.drain()
            writer.close()
        return handle
    servers = [await asyncio.start_server(serve(b"first"), "127.0.0.3", 0),
               await asyncio.start_server(serve(b"second"), "127.0.0.4", 0)]
    yield servers
    for server in servers:
        server.close()
        await server.wait_closed()


async def _ask(address: str, line: bytes) -> bytes:
    host, port = address.rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(line)
    try:
        async with asyncio.timeout(5):
            return await reader.readline()
    except ConnectionResetError:
        return b""  # closed before reading what was sent: the same refusal
    finally:
        writer.close()


async def test_connections_follow_the_pod_and_are_refused_without_a_process(echo_servers: list[asyncio.Server]) -> None:
    book = Book()
    async with PodPorts(book, ["nsq-nsqd-0"], "tcp_port") as ports:
        [address] = ports.addresses
        assert await _ask(address, b"hello\n") == b""  # no process: closed at once
        for server in echo_servers:
            host, port = server.sockets[0].getsockname()[:2]
            book.entries["nsq-nsqd-0"] = {"host": host, "tcp_port": port, "http_port": 1}
            expected = b"first" if host == "127.0.0.3" else b"second"
            assert await _ask(address, b"hello\n") == expected + b" hello\n"
        assert ports.addresses == [address]  # the same address throughout
