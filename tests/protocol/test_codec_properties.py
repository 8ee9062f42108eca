"""Properties of the codecs: decode(encode(x)) == x however the stream is cut, and no input,
however broken, makes a decoder raise anything but ProtocolError or loop forever."""
from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nsq_protocol import FRAME_MESSAGE, Frame, FrameDecoder, ProtocolError, WireMessage
from nsq_protocol.commands import Command, CommandDecoder, CommandLimits
from nsq_protocol.frames import encode_frame
from nsq_protocol.message import decode_message, encode_message, encode_message_frame
from tests.protocol.protocol_strategies import (
    SMALL_BODY,
    SMALL_MSG,
    chunked,
    command_streams,
    frame_streams,
    message_ids,
    mutated,
)

FAST = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
LIMITS = CommandLimits(max_msg_size=SMALL_MSG, max_body_size=SMALL_BODY,
                       max_req_timeout_ms=60 * 60 * 1000, max_line_length=160)
MAX_FRAME = 512

pytestmark = pytest.mark.timeout(120)


def feed_commands(chunks: list[bytes]) -> tuple[list[Command], str | None, CommandDecoder]:
    """Feed chunk by chunk, draining after each; stop at the first error (the stream is dead)."""
    d = CommandDecoder(LIMITS)
    got: list[Command] = []
    total = 0
    for chunk in chunks:
        d.feed(chunk)
        total += len(chunk)
        try:
            while (cmd := d.next_command()) is not None:
                got.append(cmd)
                assert len(got) <= total, "every command consumes at least its newline"
        except ProtocolError as err:
            return got, err.code, d
    return got, None, d


def feed_frames(chunks: list[bytes]) -> tuple[list[Frame], str | None, FrameDecoder]:
    d = FrameDecoder(max_frame_size=MAX_FRAME)
    got: list[Frame] = []
    total = 0
    for chunk in chunks:
        d.feed(chunk)
        total += len(chunk)
        try:
            while (frame := d.next_frame()) is not None:
                got.append(frame)
                assert len(got) * 8 <= total, "every frame consumes at least its header"
        except ProtocolError as err:
            return got, err.code, d
    return got, None, d


# ---------------------------------------------------------------------------
# round trips
# ---------------------------------------------------------------------------
@FAST
@given(st.data(), command_streams)
def test_commands_round_trip_in_any_chunking(data: st.DataObject, stream) -> None:
    raw = b"".join(encoded for encoded, _ in stream)
    chunks = data.draw(chunked(raw))
    got, error, decoder = feed_commands(chunks)
    assert error is None
    assert got == [expected for _, expected in stream]
    assert decoder.buffered == 0
    for cmd in got:
        if cmd.name == b"IDENTIFY":
            json.loads(cmd.body)  # still the JSON the encoder wrote


@FAST
@given(st.data(), frame_streams)
def test_frames_round_trip_in_any_chunking(data: st.DataObject, frames) -> None:
    raw = b"".join(encode_frame(t, payload) for t, payload in frames)
    got, error, decoder = feed_frames(data.draw(chunked(raw)))
    assert error is None
    assert got == [Frame(t, payload) for t, payload in frames]
    assert decoder.take_unparsed() == b""


@FAST
@given(message_ids, st.integers(-2**63, 2**63 - 1), st.integers(0, 65535), st.binary(max_size=200))
def test_messages_round_trip(msg_id: bytes, timestamp: int, attempts: int, body: bytes) -> None:
    payload = encode_message(msg_id, timestamp, attempts, body)
    assert decode_message(payload) == WireMessage(timestamp, attempts, msg_id, body)
    framed = encode_message_frame(msg_id, timestamp, attempts, body)
    assert framed == encode_frame(FRAME_MESSAGE, payload)


# ---------------------------------------------------------------------------
# robustness: garbage, truncation, mutation
# ---------------------------------------------------------------------------
garbage = st.binary(max_size=600) | st.lists(
    st.sampled_from([b"PUB t\n", b"MPUB t\n", b"DPUB t 5\n", b"IDENTIFY\n", b"AUTH\n", b"\n",
                     b"\r\n", b" ", b"\x00\x00\x00\x05", b"\xff\xff\xff\xff", b"\x00\x00\x00\x01",
                     b"abc", b"NOP\n", b"x" * 70]), max_size=30).map(b"".join) | st.lists(
    # lines on both sides of max_line_length
    st.integers(0, 2 * LIMITS.max_line_length), max_size=6).map(
        lambda lengths: b"".join(b"x" * n + b"\n" for n in lengths))


@FAST
@given(st.data(), garbage)
def test_command_decoder_only_raises_protocol_error(data: st.DataObject, raw: bytes) -> None:
    feed_commands(data.draw(chunked(raw)))  # any other exception fails the test


@FAST
@given(st.data(), st.binary(max_size=600))
def test_frame_decoder_only_raises_protocol_error(data: st.DataObject, raw: bytes) -> None:
    feed_frames(data.draw(chunked(raw)))


@FAST
@given(st.data(), garbage)
def test_command_outcome_does_not_depend_on_chunking(data: st.DataObject, raw: bytes) -> None:
    whole = feed_commands([raw])
    pieces = feed_commands(data.draw(chunked(raw)))
    assert pieces[:2] == whole[:2]


@FAST
@given(st.data(), st.binary(max_size=600))
def test_frame_outcome_does_not_depend_on_chunking(data: st.DataObject, raw: bytes) -> None:
    whole = feed_frames([raw])
    pieces = feed_frames(data.draw(chunked(raw)))
    assert pieces[:2] == whole[:2]


@FAST
@given(st.data(), command_streams)
def test_truncated_command_stream_is_a_clean_prefix(data: st.DataObject, stream) -> None:
    raw = b"".join(encoded for encoded, _ in stream)
    cut = data.draw(st.integers(0, len(raw)))
    got, error, _ = feed_commands(data.draw(chunked(raw[:cut])))
    assert error is None
    expected = [cmd for _, cmd in stream]
    assert got == expected[:len(got)]
    complete = sum(1 for end in _ends(encoded for encoded, _ in stream) if end <= cut)
    assert len(got) == complete


@FAST
@given(st.data(), frame_streams)
def test_truncated_frame_stream_is_a_clean_prefix(data: st.DataObject, frames) -> None:
    encoded = [encode_frame(t, payload) for t, payload in frames]
    raw = b"".join(encoded)
    cut = data.draw(st.integers(0, len(raw)))
    got, error, _ = feed_frames(data.draw(chunked(raw[:cut])))
    assert error is None
    complete = sum(1 for end in _ends(encoded) if end <= cut)
    assert got == [Frame(t, payload) for t, payload in frames[:complete]]


@FAST
@given(st.data(), command_streams)
def test_mutated_command_stream_only_raises_protocol_error(data: st.DataObject, stream) -> None:
    raw = data.draw(mutated(b"".join(encoded for encoded, _ in stream)))
    feed_commands(data.draw(chunked(raw)))


@FAST
@given(st.data(), frame_streams)
def test_mutated_frame_stream_only_raises_protocol_error(data: st.DataObject, frames) -> None:
    raw = data.draw(mutated(b"".join(encode_frame(t, payload) for t, payload in frames)))
    feed_frames(data.draw(chunked(raw)))


@FAST
@given(st.binary(max_size=100))
def test_decode_message_only_raises_protocol_error(raw: bytes) -> None:
    try:
        msg = decode_message(raw)
    except ProtocolError as err:
        assert err.code == "E_BAD_MESSAGE"
        assert len(raw) < 26
    else:
        assert encode_message(msg.id, msg.timestamp, msg.attempts, msg.body) == raw


def _ends(parts) -> list[int]:
    ends, total = [], 0
    for part in parts:
        total += len(part)
        ends.append(total)
    return ends
