"""V2 frames: [size:int32][type:int32][data], size = 4 + len(data)."""
from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nsq_protocol import (
    FRAME_ERROR,
    FRAME_MESSAGE,
    FRAME_RESPONSE,
    HEARTBEAT,
    Frame,
    FrameDecoder,
    ProtocolError,
    encode_frame,
)


def header(size: int, frame_type: int) -> bytes:
    return struct.pack(">Ii", size, frame_type)


def drain(decoder: FrameDecoder) -> list[Frame]:
    return list(decoder)


def test_frame_type_numbers() -> None:
    assert (FRAME_RESPONSE, FRAME_ERROR, FRAME_MESSAGE) == (0, 1, 2)


def test_encode_ok_response() -> None:
    assert encode_frame(FRAME_RESPONSE, b"OK") == b"\x00\x00\x00\x06\x00\x00\x00\x00OK"


def test_encode_heartbeat() -> None:
    assert encode_frame(FRAME_RESPONSE, HEARTBEAT) == (
        b"\x00\x00\x00\x0f\x00\x00\x00\x00_heartbeat_")


def test_encode_error() -> None:
    assert encode_frame(FRAME_ERROR, b"E_INVALID x") == (
        b"\x00\x00\x00\x0f\x00\x00\x00\x01E_INVALID x")


def test_encode_empty_data_has_size_4() -> None:
    assert encode_frame(FRAME_MESSAGE, b"") == b"\x00\x00\x00\x04\x00\x00\x00\x02"


def test_decode_one_frame() -> None:
    d = FrameDecoder()
    d.feed(encode_frame(FRAME_RESPONSE, b"OK"))
    assert drain(d) == [Frame(FRAME_RESPONSE, b"OK")]
    assert d.next_frame() is None


def test_decode_several_frames_from_one_chunk() -> None:
    stream = (encode_frame(FRAME_RESPONSE, b"OK") + encode_frame(FRAME_ERROR, b"E_BAD_BODY no")
              + encode_frame(FRAME_MESSAGE, b"m" * 30))
    d = FrameDecoder()
    d.feed(stream)
    assert drain(d) == [Frame(FRAME_RESPONSE, b"OK"), Frame(FRAME_ERROR, b"E_BAD_BODY no"),
                        Frame(FRAME_MESSAGE, b"m" * 30)]


def test_decode_one_byte_at_a_time() -> None:
    stream = encode_frame(FRAME_RESPONSE, HEARTBEAT) + encode_frame(FRAME_MESSAGE, b"\n\x00body")
    d = FrameDecoder()
    got: list[Frame] = []
    for i in range(len(stream)):
        d.feed(stream[i:i + 1])
        got += drain(d)
    assert got == [Frame(FRAME_RESPONSE, HEARTBEAT), Frame(FRAME_MESSAGE, b"\n\x00body")]


def test_incomplete_frame_waits() -> None:
    frame = encode_frame(FRAME_RESPONSE, b"hello")
    d = FrameDecoder()
    d.feed(frame[:-1])
    assert d.next_frame() is None
    d.feed(frame[-1:])
    assert d.next_frame() == Frame(FRAME_RESPONSE, b"hello")


def test_empty_data_frame_decodes() -> None:
    d = FrameDecoder()
    d.feed(header(4, FRAME_RESPONSE))
    assert d.next_frame() == Frame(FRAME_RESPONSE, b"")


def test_frame_kind_properties() -> None:
    ok, err, msg = Frame(FRAME_RESPONSE, b"OK"), Frame(FRAME_ERROR, b"E_X y"), Frame(FRAME_MESSAGE, b"")
    assert (ok.is_response, ok.is_error, ok.is_message) == (True, False, False)
    assert (err.is_response, err.is_error, err.is_message) == (False, True, False)
    assert (msg.is_response, msg.is_error, msg.is_message) == (False, False, True)


def test_error_code_is_the_first_word() -> None:
    assert Frame(FRAME_ERROR, b"E_INVALID invalid command BOGUS").error_code == "E_INVALID"
    assert Frame(FRAME_ERROR, b"E_BAD_BODY").error_code == "E_BAD_BODY"


@pytest.mark.parametrize("size", [0, 1, 3])
def test_size_below_4_is_refused_as_soon_as_the_header_arrives(size: int) -> None:
    d = FrameDecoder()
    d.feed(header(size, FRAME_RESPONSE))
    with pytest.raises(ProtocolError) as caught:
        d.next_frame()
    assert caught.value.code == "E_BAD_BODY"


@pytest.mark.parametrize("frame_type", [3, 4, -1, 0x7FFFFFFF])
def test_unknown_frame_type_is_refused(frame_type: int) -> None:
    d = FrameDecoder()
    d.feed(header(6, frame_type) + b"OK")
    with pytest.raises(ProtocolError) as caught:
        d.next_frame()
    assert caught.value.code == "E_BAD_BODY"


def test_frame_over_max_size_is_refused_before_its_data_arrives() -> None:
    d = FrameDecoder(max_frame_size=100)
    d.feed(header(101, FRAME_MESSAGE))
    with pytest.raises(ProtocolError):
        d.next_frame()


def test_frame_at_max_size_is_accepted() -> None:
    d = FrameDecoder(max_frame_size=100)
    d.feed(encode_frame(FRAME_MESSAGE, b"x" * 96))
    assert d.next_frame() == Frame(FRAME_MESSAGE, b"x" * 96)


def test_take_unparsed_hands_back_what_follows_the_last_frame() -> None:
    # e.g. the OK to a deflate IDENTIFY is followed by compressed bytes
    d = FrameDecoder()
    d.feed(encode_frame(FRAME_RESPONSE, b"OK") + b"\x01\x02compressed")
    assert d.next_frame() == Frame(FRAME_RESPONSE, b"OK")
    assert d.take_unparsed() == b"\x01\x02compressed"
    assert d.take_unparsed() == b""
    assert d.next_frame() is None


def test_take_unparsed_includes_a_partial_frame() -> None:
    partial = encode_frame(FRAME_RESPONSE, b"hello")[:7]
    d = FrameDecoder()
    d.feed(partial)
    assert d.next_frame() is None
    assert d.take_unparsed() == partial


def test_decoder_keeps_working_after_take_unparsed() -> None:
    d = FrameDecoder()
    d.feed(b"junk")
    d.take_unparsed()
    d.feed(encode_frame(FRAME_RESPONSE, b"OK"))
    assert d.next_frame() == Frame(FRAME_RESPONSE, b"OK")


def test_long_stream_in_odd_chunks_loses_nothing() -> None:
    frames = [Frame(i % 3, bytes([i % 256]) * (i % 700)) for i in range(600)]
    stream = b"".join(encode_frame(f.type, f.data) for f in frames)
    d = FrameDecoder()
    got: list[Frame] = []
    for start in range(0, len(stream), 997):
        d.feed(stream[start:start + 997])
        got += drain(d)
    assert got == frames
    assert d.take_unparsed() == b""


def take_all(decoder: FrameDecoder) -> list[Frame]:
    """Message frames taken in runs, any other frame one at a time, as a bulk consumer does."""
    got: list[Frame] = []
    while True:
        got += [Frame(FRAME_MESSAGE, data) for data in decoder.next_message_payloads()]
        frame = decoder.next_frame()
        if frame is None:
            return got
        got.append(frame)


@given(st.lists(st.tuples(st.sampled_from([FRAME_RESPONSE, FRAME_ERROR, FRAME_MESSAGE, FRAME_MESSAGE]),
                          st.binary(max_size=300)), max_size=80),
       st.integers(1, 2000))
def test_message_runs_taken_in_bulk_come_out_as_frame_by_frame(spec: list[tuple[int, bytes]], chunk: int) -> None:
    frames = [Frame(t, data) for t, data in spec]
    stream = b"".join(encode_frame(f.type, f.data) for f in frames)
    d = FrameDecoder()
    got: list[Frame] = []
    for start in range(0, len(stream), chunk):
        d.feed(stream[start:start + chunk])
        got += take_all(d)
    assert got == frames
    assert d.take_unparsed() == b""


def test_a_bad_size_in_a_run_of_messages_is_refused() -> None:
    d = FrameDecoder(max_frame_size=100)
    d.feed(encode_frame(FRAME_MESSAGE, b"m" * 30) + header(101, FRAME_MESSAGE))
    with pytest.raises(ProtocolError, match="invalid frame size 101"):
        d.next_message_payloads()
