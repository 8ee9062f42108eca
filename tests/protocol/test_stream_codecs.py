"""The compression codecs IDENTIFY switches on (nsq_protocol.compression), one copy for
nsqd and the client: what one side encodes the other decodes, however TCP splits it,
both formats are the ones other NSQ programs speak, and garbage is a CompressionError."""
from __future__ import annotations

import zlib

import pytest
import snappy
from hypothesis import given, settings
from hypothesis import strategies as st

from nsq_protocol.compression import (SNAPPY_CHUNK, CompressionError, DeflateCodec, SnappyCodec, StreamCodec,
                                      codec_for)

SNAPPY_STREAM_IDENTIFIER = b"\xff\x06\x00\x00sNaPpY"


def pair(kind: str, level: int = 6) -> tuple[StreamCodec, StreamCodec]:
    return (DeflateCodec(level), DeflateCodec(level)) if kind == "deflate" else (SnappyCodec(), SnappyCodec())


def fed_in_pieces(codec: StreamCodec, data: bytes, cuts: list[int]) -> bytes:
    edges = sorted({0, len(data), *(c % (len(data) + 1) for c in cuts)})
    return b"".join(codec.decode(data[a:b]) for a, b in zip(edges, edges[1:]))


@settings(max_examples=60, deadline=None)
@given(kind=st.sampled_from(["deflate", "snappy"]), writes=st.lists(st.binary(max_size=3000), max_size=8),
       cuts=st.lists(st.integers(min_value=0), max_size=6), level=st.integers(1, 9))
def test_what_one_side_writes_the_other_reads(kind: str, writes: list[bytes], cuts: list[int], level: int) -> None:
    sender, receiver = pair(kind, level)
    stream = b"".join(sender.encode(w) for w in writes)
    assert fed_in_pieces(receiver, stream, cuts) == b"".join(writes)


@pytest.mark.parametrize("kind", ["deflate", "snappy"])
def test_each_write_decodes_as_soon_as_it_arrives(kind: str) -> None:
    # a command must be readable before the next one is sent
    sender, receiver = pair(kind)
    for command in (b"NOP\n", b"RDY 10\n", b"FIN 0123456789abcdef\n"):
        assert receiver.decode(sender.encode(command)) == command


def test_snappy_splits_writes_longer_than_a_chunk() -> None:
    body = bytes(range(256)) * 1000  # 256000 bytes: four chunks
    encoded = SnappyCodec().encode(body)
    assert encoded.startswith(SNAPPY_STREAM_IDENTIFIER)
    assert snappy.StreamDecompressor().decompress(encoded) == body
    assert len(body) > 3 * SNAPPY_CHUNK


def test_deflate_is_raw_deflate_without_a_zlib_header() -> None:
    encoded = DeflateCodec(9).encode(b"hello hello hello")
    assert zlib.decompressobj(-zlib.MAX_WBITS).decompress(encoded) == b"hello hello hello"
    with pytest.raises(zlib.error):
        zlib.decompress(encoded)  # a zlib stream would start with a header


@pytest.mark.parametrize("codec,garbage", [
    (DeflateCodec(6), b"\xff\xff\xff\xff garbage"),
    (SnappyCodec(), SNAPPY_STREAM_IDENTIFIER + b"\x00\x05\x00\x00\x00\x00\x00\x00\xff"),  # bad CRC
    (SnappyCodec(), b"\x01\x00\x00\x00"),  # no stream identifier first
])
def test_garbage_is_a_compression_error(codec: StreamCodec, garbage: bytes) -> None:
    with pytest.raises(CompressionError):
        codec.decode(garbage)


def test_codec_for_what_identify_answered() -> None:
    assert isinstance(codec_for(True, False, 6), SnappyCodec)
    assert isinstance(codec_for(False, True, 3), DeflateCodec)
    assert codec_for(False, False, 6) is None
