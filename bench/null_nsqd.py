"""The floor for a Python nsqd on this machine: a uvloop server that speaks just enough of
protocol V2 to answer ``OK`` to every PUB and MPUB, and nothing else (no IDs, no queues,
no stats). ``bench/cbench.py --null`` measures it beside nsqd, so a row can be read as
"what any Python server here gets" against "what nsqd gets".

    python bench/null_nsqd.py --tcp-address=127.0.0.1:4150 --http-address=127.0.0.1:4151 [other flags ignored]
"""
from __future__ import annotations

import asyncio
import struct
import sys

import uvloop

OK_FRAME = struct.pack(">ii", 6, 0) + b"OK"
SIZE = struct.Struct(">I")


class NullV2(asyncio.Protocol):
    def __init__(self) -> None:
        self.buf = b""
        self.magic_seen = False
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        buf = self.buf + data if self.buf else data
        pos = 0
        if not self.magic_seen:
            if len(buf) < 4:
                self.buf = buf
                return
            self.magic_seen, pos = True, 4
        answers = 0
        while True:  # "<PUB|MPUB> topic\n" + 4-byte size + body; anything else is not expected
            nl = buf.find(b"\n", pos)
            if nl < 0 or len(buf) < nl + 5:
                break
            (size,) = SIZE.unpack_from(buf, nl + 1)
            if len(buf) < nl + 5 + size:
                break
            pos = nl + 5 + size
            answers += 1
        self.buf = buf[pos:]
        if answers and self.transport is not None:
            self.transport.write(OK_FRAME * answers)


class Ping(asyncio.Protocol):
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.transport.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nOK")  # type: ignore[attr-defined]
        self.transport.close()


def address(flag: str) -> tuple[str, int]:
    value = next(a.split("=", 1)[1] for a in sys.argv[1:] if a.startswith(f"--{flag}="))
    host, port = value.rsplit(":", 1)
    return host, int(port)


async def serve() -> None:
    loop = asyncio.get_running_loop()
    await loop.create_server(NullV2, *address("tcp-address"))
    await loop.create_server(Ping, *address("http-address"))
    await asyncio.Event().wait()


if __name__ == "__main__":
    uvloop.run(serve())
