"""A recording TCP proxy between the client and nsqd: forwards bytes both ways and decodes
what the client sends (uncompressed connections only), so tests can read RDY, FIN, REQ,
NOP, CLS ... exactly as they went on the wire. It can also cut every connection."""
from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

from nsq_protocol.commands import Command, CommandDecoder, CommandLimits
from tests.servers import HOST, free_port


@dataclass
class Sent:
    at: float
    name: str
    params: tuple[str, ...]


@dataclass
class ProxiedConnection:
    index: int
    sent: list[Sent] = field(default_factory=list)
    closed: bool = False
    _decoder: CommandDecoder = field(default_factory=lambda: CommandDecoder(CommandLimits(max_body_size=1 << 30, max_msg_size=1 << 30)))
    _magic: bytes = b""
    _writers: list[asyncio.StreamWriter] = field(default_factory=list)

    def feed(self, data: bytes) -> None:
        if len(self._magic) < 4:
            take = 4 - len(self._magic)
            self._magic += data[:take]
            data = data[take:]
        self._decoder.feed(data)
        now = time.monotonic()
        while (command := self._decoder.next_command()) is not None:
            self.sent.append(_record(command, now))

    def names(self) -> list[str]:
        return [s.name for s in self.sent]

    def rdy_counts(self) -> list[int]:
        return [int(s.params[0]) for s in self.sent if s.name == "RDY"]

    @property
    def last_rdy(self) -> int:
        counts = self.rdy_counts()
        return counts[-1] if counts else 0


def _record(command: Command, at: float) -> Sent:
    return Sent(at, command.name.decode(), tuple(p.decode("ascii", "replace") for p in command.params))


class RecordingProxy:
    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self.port = free_port()
        self.connections: list[ProxiedConnection] = []
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def address(self) -> str:
        return f"{HOST}:{self.port}"

    async def start(self) -> "RecordingProxy":
        self._server = await asyncio.start_server(self._accept, HOST, self.port)
        return self

    async def _accept(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        conn = ProxiedConnection(len(self.connections))
        self.connections.append(conn)
        try:
            nsqd_r, nsqd_w = await asyncio.open_connection(*self.target)
        except OSError:
            client_w.close()
            conn.closed = True
            return
        conn._writers = [client_w, nsqd_w]
        up = asyncio.create_task(self._pipe(client_r, nsqd_w, conn))
        down = asyncio.create_task(self._pipe(nsqd_r, client_w, None))
        self._tasks.update((up, down))
        await asyncio.wait([up, down], return_when=asyncio.FIRST_COMPLETED)
        for task in (up, down):
            task.cancel()
        for writer in conn._writers:
            writer.close()
        conn.closed = True

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                    record: ProxiedConnection | None) -> None:
        while data := await reader.read(65536):
            if record is not None:
                record.feed(data)
            writer.write(data)
            await writer.drain()

    def cut(self) -> None:
        """Close every proxied connection at once, as a network failure would."""
        for conn in self.connections:
            for writer in conn._writers:
                writer.close()

    @property
    def open_connections(self) -> list[ProxiedConnection]:
        return [c for c in self.connections if not c.closed]

    async def close(self) -> None:
        self.cut()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        for task in self._tasks:
            task.cancel()
