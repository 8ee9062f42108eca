"""A consumer written by hand on a bare socket: it takes one message and holds it in
flight until it sends FIN (a disconnect leaves it in flight until its timeout)."""
from __future__ import annotations

import asyncio
from types import TracebackType

from nsq_protocol import commands
from nsq_protocol.frames import Frame, FrameDecoder
from nsq_protocol.message import decode_message

MAGIC_V2 = b"  V2"


class HeldMessage:
    def __init__(self, tcp_address: str, topic: str, channel: str, timeout: float = 10.0) -> None:
        self.address, self.topic, self.channel, self.timeout = tcp_address, topic, channel, timeout
        self.body = b""
        self.id = b""
        self._writer: asyncio.StreamWriter | None = None

    async def __aenter__(self) -> "HeldMessage":
        host, port = self.address.rsplit(":", 1)
        async with asyncio.timeout(self.timeout):
            reader, self._writer = await asyncio.open_connection(host, int(port))
            self._writer.write(MAGIC_V2 + commands.sub(self.topic, self.channel) + commands.rdy(1))
            await self._writer.drain()
            frame = await self._next_message(reader)
        message = decode_message(frame.data)
        self.body, self.id = message.body, message.id
        return self

    async def finish(self) -> None:
        assert self._writer is not None
        self._writer.write(commands.fin(self.id))
        await self._writer.drain()

    @staticmethod
    async def _next_message(reader: asyncio.StreamReader) -> Frame:
        decoder = FrameDecoder()
        while True:
            while (frame := decoder.next_frame()) is not None:
                assert not frame.is_error, frame.data
                if frame.is_message:
                    return frame
            chunk = await reader.read(65536)
            if not chunk:
                raise ConnectionError("nsqd closed the connection before sending a message")
            decoder.feed(chunk)

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        if self._writer is not None:
            self._writer.close()
            await self._writer.wait_closed()
