"""Messages: [timestamp ns:int64][attempts:uint16][id:16][body], alone and inside a frame."""
from __future__ import annotations

import pytest

from nsq_protocol import FRAME_MESSAGE, MSG_ID_LENGTH, FrameDecoder, ProtocolError, WireMessage
from nsq_protocol.frames import encode_frame
from nsq_protocol.message import decode_message, encode_message, encode_message_frame

MSG_ID = b"0123456789abcdef"
TIMESTAMP = 0x1797_9CFE_3D85_CD15  # 2023-11-14T22:13:20.123456789Z in ns


def test_id_length_is_16() -> None:
    assert MSG_ID_LENGTH == 16


def test_encode_layout() -> None:
    payload = encode_message(MSG_ID, TIMESTAMP, 3, b"hello")
    assert payload == (bytes.fromhex("17979cfe3d85cd15") + b"\x00\x03" + MSG_ID + b"hello")


def test_decode_layout() -> None:
    raw = bytes.fromhex("17979cfe3d85cd15") + b"\x01\x02" + MSG_ID + b"\x00\nbody"
    assert decode_message(raw) == WireMessage(TIMESTAMP, 0x0102, MSG_ID, b"\x00\nbody")


def test_round_trip_with_empty_body() -> None:
    raw = encode_message(MSG_ID, 0, 0, b"")
    assert len(raw) == 26
    assert decode_message(raw) == WireMessage(0, 0, MSG_ID, b"")


def test_attempts_is_unsigned_16_bits() -> None:
    raw = encode_message(MSG_ID, 1, 65535, b"x")
    assert raw[8:10] == b"\xff\xff"
    assert decode_message(raw).attempts == 65535


def test_decode_accepts_a_memoryview() -> None:
    raw = encode_message(MSG_ID, TIMESTAMP, 1, b"body")
    assert decode_message(memoryview(raw)) == WireMessage(TIMESTAMP, 1, MSG_ID, b"body")


@pytest.mark.parametrize("length", [0, 1, 10, 25])
def test_shorter_than_the_header_is_e_bad_message(length: int) -> None:
    raw = encode_message(MSG_ID, TIMESTAMP, 1, b"")[:length]
    with pytest.raises(ProtocolError) as caught:
        decode_message(raw)
    assert caught.value.code == "E_BAD_MESSAGE"


def test_message_frame_is_a_frame_around_the_payload() -> None:
    framed = encode_message_frame(MSG_ID, TIMESTAMP, 2, b"payload")
    assert framed == encode_frame(FRAME_MESSAGE, encode_message(MSG_ID, TIMESTAMP, 2, b"payload"))
    assert framed[:8] == (4 + 26 + 7).to_bytes(4, "big") + b"\x00\x00\x00\x02"


def test_message_frame_decodes_back_through_the_frame_decoder() -> None:
    d = FrameDecoder()
    d.feed(encode_message_frame(MSG_ID, TIMESTAMP, 1, b"a") + encode_message_frame(MSG_ID, 5, 9, b"bc"))
    got = [decode_message(f.data) for f in d if f.is_message]
    assert got == [WireMessage(TIMESTAMP, 1, MSG_ID, b"a"), WireMessage(5, 9, MSG_ID, b"bc")]
