"""The client's side of protocol V2: each command's exact bytes, and the parameter helpers."""
from __future__ import annotations

import json
import struct

import pytest

from nsq_protocol import CLOSE_WAIT, HEARTBEAT, MAGIC_V1, MAGIC_V2, OK, ProtocolError, commands

MSG_ID = b"0123456789abcdef"


def size(n: int) -> bytes:
    return struct.pack(">I", n)


def test_magic_and_fixed_responses() -> None:
    assert MAGIC_V2 == b"  V2"
    assert MAGIC_V1 == b"  V1"
    assert (OK, HEARTBEAT, CLOSE_WAIT) == (b"OK", b"_heartbeat_", b"CLOSE_WAIT")


def test_line_commands() -> None:
    assert commands.nop() == b"NOP\n"
    assert commands.cls() == b"CLS\n"
    assert commands.rdy(100) == b"RDY 100\n"
    assert commands.sub("events", "archive#ephemeral") == b"SUB events archive#ephemeral\n"
    assert commands.fin(MSG_ID) == b"FIN 0123456789abcdef\n"
    assert commands.touch(MSG_ID) == b"TOUCH 0123456789abcdef\n"
    assert commands.req(MSG_ID, 2500) == b"REQ 0123456789abcdef 2500\n"
    assert commands.req(MSG_ID, 0) == b"REQ 0123456789abcdef 0\n"


def test_fins_is_one_fin_line_per_id_in_order() -> None:
    ids = [MSG_ID, b"fedcba9876543210", MSG_ID[::-1]]
    assert commands.fins(ids) == b"".join(commands.fin(i) for i in ids)
    assert commands.fins([MSG_ID]) == commands.fin(MSG_ID)
    assert commands.fins([]) == b""


def test_pub() -> None:
    assert commands.pub("t", b"hello") == b"PUB t\n" + size(5) + b"hello"


def test_pub_binary_body_is_untouched() -> None:
    body = bytes(range(256))
    assert commands.pub("t", body) == b"PUB t\n" + size(256) + body


def test_dpub() -> None:
    assert commands.dpub("t", 1500, b"later") == b"DPUB t 1500\n" + size(5) + b"later"


def test_mpub() -> None:
    body = size(2) + size(1) + b"a" + size(3) + b"bcd"
    assert commands.encode_mpub_body([b"a", b"bcd"]) == body
    assert commands.mpub("t", [b"a", b"bcd"]) == b"MPUB t\n" + size(len(body)) + body


def test_auth_from_str_or_bytes() -> None:
    assert commands.auth("s3cret") == b"AUTH\n" + size(6) + b"s3cret"
    assert commands.auth(b"\x00\xff") == b"AUTH\n" + size(2) + b"\x00\xff"


def test_identify_carries_json() -> None:
    data = {"client_id": "c1", "feature_negotiation": True, "heartbeat_interval": 5000}
    raw = commands.identify(data)
    assert raw.startswith(b"IDENTIFY\n")
    (n,) = struct.unpack(">I", raw[9:13])
    assert n == len(raw) - 13
    assert json.loads(raw[13:]) == data


@pytest.mark.parametrize("text,value", [(b"0", 0), (b"1500", 1500), (b"007", 7), (b"", 0),
                                        (b"18446744073709551615", 2**64 - 1)])
def test_parse_base10(text: bytes, value: int) -> None:
    assert commands.parse_base10(text) == value


@pytest.mark.parametrize("text", [b"-1", b"+1", b"1.5", b"abc", b" 1", b"1e3", b"\xd9\xa1"])
def test_parse_base10_refuses_anything_but_ascii_digits(text: bytes) -> None:
    with pytest.raises(ValueError):
        commands.parse_base10(text)


def test_parse_message_id() -> None:
    assert commands.parse_message_id(MSG_ID) == MSG_ID


@pytest.mark.parametrize("value", [b"", b"short", MSG_ID + b"0"])
def test_parse_message_id_needs_16_bytes(value: bytes) -> None:
    with pytest.raises(ProtocolError) as caught:
        commands.parse_message_id(value)
    assert caught.value.code == "E_INVALID"


def test_check_sub_params() -> None:
    assert commands.check_sub_params((b"t", b"c#ephemeral")) == ("t", "c#ephemeral")


@pytest.mark.parametrize("params,code", [
    ((), "E_INVALID"),
    ((b"t",), "E_INVALID"),
    ((b"bad$", b"c"), "E_BAD_TOPIC"),
    ((b"bad$", b"bad$"), "E_BAD_TOPIC"),  # the topic is looked at first
    ((b"t", b"bad$"), "E_BAD_CHANNEL"),
    ((b"t", b"x" * 65), "E_BAD_CHANNEL"),
])
def test_check_sub_params_errors(params: tuple[bytes, ...], code: str) -> None:
    with pytest.raises(ProtocolError) as caught:
        commands.check_sub_params(params)
    assert caught.value.code == code


# parse_mpub_body is shared by the TCP decoder and nsqd's binary /mpub
def test_parse_mpub_body() -> None:
    assert commands.parse_mpub_body(commands.encode_mpub_body([b"a", b"bc"]), 10) == [b"a", b"bc"]


@pytest.mark.parametrize("body,code", [
    (b"", "E_BAD_BODY"),                                   # no count
    (b"\x00\x00\x01", "E_BAD_BODY"),                       # short count
    (size(0), "E_BAD_BODY"),                               # zero messages
    (b"\xff\xff\xff\xff", "E_BAD_BODY"),                   # negative count
    (size(1), "E_BAD_MESSAGE"),                            # no size for message 0
    (size(1) + size(0), "E_BAD_MESSAGE"),                  # empty message
    (size(1) + b"\xff\xff\xff\xff", "E_BAD_MESSAGE"),      # negative message size
    (size(1) + size(11) + b"x" * 11, "E_BAD_MESSAGE"),     # message over max_msg_size
    (size(1) + size(5) + b"abc", "E_BAD_MESSAGE"),         # truncated message
    (size(2) + size(1) + b"a", "E_BAD_MESSAGE"),           # fewer messages than counted
    (size(1) + size(1) + b"a" + b"extra", "E_BAD_BODY"),   # bytes after the last message
])
def test_parse_mpub_body_errors(body: bytes, code: str) -> None:
    with pytest.raises(ProtocolError) as caught:
        commands.parse_mpub_body(body, 10)
    assert caught.value.code == code


def test_parse_mpub_body_count_bounded_by_max_body_size() -> None:
    # each message takes at least 5 bytes after the 4-byte count: (104 - 4) // 5 == 20
    twenty = commands.encode_mpub_body([b"m"] * 20)
    assert len(commands.parse_mpub_body(twenty, 10, max_body_size=104)) == 20
    with pytest.raises(ProtocolError) as caught:
        commands.parse_mpub_body(size(21) + twenty[4:], 10, max_body_size=104)
    assert caught.value.code == "E_BAD_BODY"
