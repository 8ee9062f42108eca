"""Reading stdin as delimited records without blocking the event loop.

Pipes, sockets and terminals are read through the loop (with its back-pressure: nothing
is read ahead of what is consumed beyond the stream's buffer). Regular files and devices
that are not terminals (``/dev/null``) never block and cannot be polled, so they are read
directly.
"""
from __future__ import annotations

import asyncio
import os
import stat
from typing import AsyncIterator, BinaryIO

CHUNK = 65536


class DelimitedRecords:
    """Splits a byte stream into records at ``delimiter``; empty records are dropped
    (NSQ has no empty messages) and the delimiter is not part of a record."""

    def __init__(self, delimiter: bytes) -> None:
        if len(delimiter) != 1:
            raise ValueError("the delimiter is a single byte")
        self.delimiter = delimiter
        self._partial = b""

    def feed(self, data: bytes) -> list[bytes]:
        """The records completed by ``data``."""
        *complete, self._partial = (self._partial + data).split(self.delimiter)
        return [record for record in complete if record]

    def finish(self) -> list[bytes]:
        """At the end of input: the last record, even without a delimiter after it."""
        last, self._partial = self._partial, b""
        return [last] if last else []


async def read_chunks(source: BinaryIO) -> AsyncIterator[bytes]:
    fd = source.fileno()
    if not _pollable(fd):
        while chunk := os.read(fd, CHUNK):
            yield chunk
        return
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=CHUNK, loop=loop)
    was_blocking = os.get_blocking(fd)
    transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader, loop=loop), source)
    try:
        while chunk := await reader.read(CHUNK):
            yield chunk
    finally:
        transport.close()
        os.set_blocking(fd, was_blocking)  # a terminal is shared with the shell that started us


def _pollable(fd: int) -> bool:
    mode = os.fstat(fd).st_mode
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or (stat.S_ISCHR(mode) and os.isatty(fd))


async def read_records(source: BinaryIO, delimiter: bytes) -> AsyncIterator[bytes]:
    records = DelimitedRecords(delimiter)
    async for chunk in read_chunks(source):
        for record in records.feed(chunk):
            yield record
    for record in records.finish():
        yield record
