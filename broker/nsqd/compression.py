"""The stream codecs a connection can switch to after IDENTIFY: raw DEFLATE and snappy's
framing format (what go-nsq and pynsq speak)."""
from __future__ import annotations

import zlib
from typing import Protocol

import snappy


class StreamCodec(Protocol):
    def encode(self, data: bytes) -> bytes: ...
    def decode(self, data: bytes) -> bytes: ...


class DeflateCodec:
    def __init__(self, level: int) -> None:
        self._out = zlib.compressobj(level, zlib.DEFLATED, -zlib.MAX_WBITS)
        self._in = zlib.decompressobj(-zlib.MAX_WBITS)

    def encode(self, data: bytes) -> bytes:
        return self._out.compress(data) + self._out.flush(zlib.Z_SYNC_FLUSH)

    def decode(self, data: bytes) -> bytes:
        return self._in.decompress(data)


class SnappyCodec:
    _MAX_CHUNK = 65536  # the framing format's largest uncompressed chunk

    def __init__(self) -> None:
        self._out = snappy.StreamCompressor()
        self._in = snappy.StreamDecompressor()

    def encode(self, data: bytes) -> bytes:
        if len(data) <= self._MAX_CHUNK:
            return self._out.add_chunk(data)
        view = memoryview(data)
        return b"".join(self._out.add_chunk(bytes(view[i:i + self._MAX_CHUNK]))
                        for i in range(0, len(data), self._MAX_CHUNK))

    def decode(self, data: bytes) -> bytes:
        return self._in.decompress(data)
