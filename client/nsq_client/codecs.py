"""Stream codecs a connection switches to after IDENTIFY negotiates compression: raw
DEFLATE (no zlib header) and snappy's framing format, as nsqd speaks them."""
from __future__ import annotations

import zlib
from typing import Protocol

import snappy


class StreamCodec(Protocol):
    def encode(self, data: bytes) -> bytes: ...
    def decode(self, data: bytes) -> bytes: ...


class DeflateCodec:
    def __init__(self, level: int) -> None:
        self._compressor = zlib.compressobj(level, zlib.DEFLATED, -zlib.MAX_WBITS)
        self._decompressor = zlib.decompressobj(-zlib.MAX_WBITS)

    def encode(self, data: bytes) -> bytes:
        # a sync flush per write: nsqd must be able to decode each command as it arrives
        return self._compressor.compress(data) + self._compressor.flush(zlib.Z_SYNC_FLUSH)

    def decode(self, data: bytes) -> bytes:
        return self._decompressor.decompress(data)


class SnappyCodec:
    CHUNK = 65536  # the framing format's largest uncompressed chunk

    def __init__(self) -> None:
        self._compressor = snappy.StreamCompressor()
        self._decompressor = snappy.StreamDecompressor()

    def encode(self, data: bytes) -> bytes:
        if len(data) <= self.CHUNK:
            return bytes(self._compressor.add_chunk(data))
        view = memoryview(data)
        return b"".join(self._compressor.add_chunk(bytes(view[i:i + self.CHUNK]))
                        for i in range(0, len(data), self.CHUNK))

    def decode(self, data: bytes) -> bytes:
        return bytes(self._decompressor.decompress(data))


def codec_for(snappy_on: bool, deflate_on: bool, deflate_level: int) -> StreamCodec | None:
    if snappy_on:
        return SnappyCodec()
    if deflate_on:
        return DeflateCodec(deflate_level)
    return None
