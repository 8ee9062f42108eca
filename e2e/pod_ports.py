"""Stable addresses for pods whose processes move. In Kubernetes a pod keeps its DNS name
and its container ports across restarts; the test kubelet starts a replacement process on
a new loopback address and new ports. A :class:`PodPort` is a fixed 127.0.0.1 port that
forwards each connection to wherever the pod's process listens now (read from the
kubelet's address book), and refuses it (closes at once) while the pod has no process.

    async with PodPorts(book, ["roll-lookupd-0", "roll-lookupd-1"], "http_port") as ports:
        ports.addresses   # ["127.0.0.1:40123", "127.0.0.1:40125"], one per pod, stable
"""
from __future__ import annotations

import asyncio
import contextlib
from types import TracebackType
from typing import Any, Literal, Protocol

PortKind = Literal["tcp_port", "http_port"]
COPY_CHUNK = 1 << 16


class AddressBook(Protocol):
    """The test kubelet's address book (tests.operator): pod -> its process's addresses."""

    def pods(self) -> dict[str, dict[str, Any]]: ...


async def _copy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while chunk := await reader.read(COPY_CHUNK):
            writer.write(chunk)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        writer.close()


class PodPort:
    def __init__(self, book: AddressBook, pod: str, kind: PortKind) -> None:
        self.book, self.pod, self.kind = book, pod, kind
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()

    @property
    def address(self) -> str:
        assert self._server is not None, "not started"
        host, port = self._server.sockets[0].getsockname()[:2]
        return f"{host}:{port}"

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)

    def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.ensure_future(self._forward(reader, writer))
        self._connections.add(task)
        task.add_done_callback(self._connections.discard)

    async def _forward(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        entry = self.book.pods().get(self.pod)
        try:
            if entry is None:
                raise ConnectionRefusedError(f"{self.pod} has no process")
            pod_reader, pod_writer = await asyncio.open_connection(entry["host"], entry[self.kind])
        except OSError:
            client_writer.close()  # refused, as a pod that is not running refuses
            return
        try:
            await asyncio.gather(_copy(client_reader, pod_writer), _copy(pod_reader, client_writer))
        finally:
            pod_writer.close()
            client_writer.close()

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._connections):
            task.cancel()
        await asyncio.gather(*self._connections, return_exceptions=True)
        if self._server is not None:
            with contextlib.suppress(Exception):
                async with asyncio.timeout(5):
                    await self._server.wait_closed()


class PodPorts:
    """One :class:`PodPort` per pod, started and stopped together."""

    def __init__(self, book: AddressBook, pods: list[str], kind: PortKind) -> None:
        self.ports = [PodPort(book, pod, kind) for pod in pods]

    @property
    def addresses(self) -> list[str]:
        return [p.address for p in self.ports]

    async def __aenter__(self) -> "PodPorts":
        for port in self.ports:
            await port.start()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await asyncio.gather(*(p.stop() for p in self.ports))
