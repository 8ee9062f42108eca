"""The stream codecs an NSQ connection switches to after IDENTIFY negotiates compression:
raw DEFLATE (no zlib header, a sync flush after each write) and snappy's framing format,
as nsqd, go-nsq and pynsq speak them. Sans-IO: bytes in, bytes out, for nsqd's side of a
connection and the client's alike. Snappy itself comes from python-snappy, imported by
the first snappy connection (it and cramjam cost a process a few MiB it mostly never uses)."""
from __future__ import annotations

import zlib
from typing import Protocol

SNAPPY_CHUNK = 65536  # the framing format's largest uncompressed chunk


class CompressionError(ValueError):
    """Compressed input that does not decode."""


class StreamCodec(Protocol):
    def encode(self, data: bytes) -> bytes: ...
    def decode(self, data: bytes) -> bytes: ...


class DeflateCodec:
    def __init__(self, level: int) -> None:
        self._compressor = zlib.compressobj(level, zlib.DEFLATED, -zlib.MAX_WBITS)
        self._decompressor = zlib.decompressobj(-zlib.MAX_WBITS)

    def encode(self, data: bytes) -> bytes:
        # a sync flush per write: the peer must be able to decode each command as it arrives
        return self._compressor.compress(data) + self._compressor.flush(zlib.Z_SYNC_FLUSH)

    def decode(self, data: bytes) -> bytes:
        try:
            return self._decompressor.decompress(data)
        except zlib.error as e:
            raise CompressionError(f"deflate: {e}") from None


class SnappyCodec:
    def __init__(self) -> None:
        import snappy

        self._compressor = snappy.StreamCompressor()
        self._decompressor = snappy.StreamDecompressor()

    def encode(self, data: bytes) -> bytes:
        if len(data) <= SNAPPY_CHUNK:
            return bytes(self._compressor.add_chunk(data))
        view = memoryview(data)
        return b"".join(bytes(self._compressor.add_chunk(bytes(view[i:i + SNAPPY_CHUNK])))
                        for i in range(0, len(data), SNAPPY_CHUNK))

    def decode(self, data: bytes) -> bytes:
        try:
            return bytes(self._decompressor.decompress(data))
        except Exception as e:  # python-snappy raises its own errors, and ValueError
            raise CompressionError(f"snappy: {e}") from None


def codec_for(snappy_on: bool, deflate_on: bool, deflate_level: int) -> StreamCodec | None:
    """The codec IDENTIFY's answer switched on, or None for an uncompressed stream."""
    if snappy_on:
        return SnappyCodec()
    if deflate_on:
        return DeflateCodec(deflate_level)
    return None
