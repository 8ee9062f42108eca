"""nsqd's side of protocol V2: the streaming command decoder and its checks, in nsqd's order."""
from __future__ import annotations

import struct

import pytest

from nsq_protocol import ProtocolError, commands
from nsq_protocol.commands import Command, CommandDecoder, CommandLimits

MSG_ID = b"0123456789abcdef"
LIMITS = CommandLimits(max_msg_size=100, max_body_size=300, max_req_timeout_ms=60_000,
                       max_line_length=200)


def size(n: int) -> bytes:
    return struct.pack(">i", n)


def decode_all(data: bytes, limits: CommandLimits = LIMITS) -> list[Command]:
    d = CommandDecoder(limits)
    d.feed(data)
    out = list(d)
    assert d.buffered == 0, "everything fed should have been decoded"
    return out


def decode_one(data: bytes, limits: CommandLimits = LIMITS) -> Command:
    (cmd,) = decode_all(data, limits)
    return cmd


def error_for(data: bytes, limits: CommandLimits = LIMITS, hook=None) -> ProtocolError:
    """The error raised while decoding ``data``, which must not need any more bytes."""
    d = CommandDecoder(limits, before_body=hook)
    d.feed(data)
    with pytest.raises(ProtocolError) as caught:
        while d.next_command() is not None:
            pass
    return caught.value


def test_defaults_are_nsqd_defaults() -> None:
    limits = CommandLimits()
    assert limits.max_msg_size == 1024 * 1024
    assert limits.max_body_size == 5 * 1024 * 1024
    assert limits.max_req_timeout_ms == 60 * 60 * 1000


# ---------------------------------------------------------------------------
# line commands: split on single spaces, checked later by the broker
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("raw,name,params", [
    (b"NOP\n", b"NOP", ()),
    (b"CLS\n", b"CLS", ()),
    (b"RDY 10\n", b"RDY", (b"10",)),
    (b"SUB t c\n", b"SUB", (b"t", b"c")),
    (b"FIN " + MSG_ID + b"\n", b"FIN", (MSG_ID,)),
    (b"REQ " + MSG_ID + b" 100\n", b"REQ", (MSG_ID, b"100")),
    (b"TOUCH " + MSG_ID + b"\n", b"TOUCH", (MSG_ID,)),
    (b"BOGUS\n", b"BOGUS", ()),           # unknown names are the broker's E_INVALID
    (b"\n", b"", ()),
    (b"SUB  t\n", b"SUB", (b"", b"t")),   # two spaces: an empty parameter, as nsqd splits
    (b"RDY 1 \n", b"RDY", (b"1", b"")),
    (b"nop\n", b"nop", ()),               # names are case-sensitive
])
def test_line_command(raw: bytes, name: bytes, params: tuple[bytes, ...]) -> None:
    assert decode_one(raw) == Command(name, params)


def test_crlf_line_ending_is_accepted() -> None:
    assert decode_one(b"RDY 5\r\n") == Command(b"RDY", (b"5",))
    assert decode_one(b"PUB t\r\n" + size(1) + b"x") == Command(b"PUB", (b"t",), body=b"x")


def test_only_one_carriage_return_is_stripped() -> None:
    assert decode_one(b"RDY 5\r\r\n") == Command(b"RDY", (b"5\r",))


def test_several_commands_in_one_chunk() -> None:
    stream = commands.nop() + commands.pub("t", b"a") + commands.rdy(3) + commands.fin(MSG_ID)
    assert decode_all(stream) == [Command(b"NOP", ()), Command(b"PUB", (b"t",), body=b"a"),
                                  Command(b"RDY", (b"3",)), Command(b"FIN", (MSG_ID,))]


def test_incomplete_line_waits() -> None:
    d = CommandDecoder(LIMITS)
    d.feed(b"RDY 1")
    assert d.next_command() is None
    d.feed(b"0\n")
    assert d.next_command() == Command(b"RDY", (b"10",))


def test_one_byte_at_a_time() -> None:
    stream = (commands.sub("t", "c") + commands.mpub("t", [b"\n", b" x"])
              + commands.identify({"a": 1}) + commands.nop())
    d = CommandDecoder(LIMITS)
    got: list[Command] = []
    for i in range(len(stream)):
        d.feed(stream[i:i + 1])
        got += list(d)
    assert got == decode_all(stream)
    assert [c.name for c in got] == [b"SUB", b"MPUB", b"IDENTIFY", b"NOP"]


def test_long_stream_in_odd_chunks_loses_nothing() -> None:
    one = commands.pub("t", b"p" * 90) + commands.nop() + commands.fin(MSG_ID)
    stream = one * 1000  # well past the decoder's compaction threshold
    d = CommandDecoder(LIMITS)
    got: list[Command] = []
    for start in range(0, len(stream), 1021):
        d.feed(stream[start:start + 1021])
        got += list(d)
    assert len(got) == 3000
    assert got[-3:] == [Command(b"PUB", (b"t",), body=b"p" * 90), Command(b"NOP", ()),
                        Command(b"FIN", (MSG_ID,))]
    assert d.buffered == 0


# ---------------------------------------------------------------------------
# line length
# ---------------------------------------------------------------------------
def test_line_at_max_length_is_accepted() -> None:
    line = b"SUB " + b"x" * 196
    assert len(line) == LIMITS.max_line_length
    assert decode_one(line + b"\n").params == (b"x" * 196,)


def test_line_over_max_length_without_newline_is_e_invalid() -> None:
    d = CommandDecoder(LIMITS)
    d.feed(b"x" * 200)
    assert d.next_command() is None  # still might end in time
    d.feed(b"x")
    with pytest.raises(ProtocolError) as caught:
        d.next_command()
    assert caught.value.code == "E_INVALID"


def test_line_over_max_length_is_e_invalid_even_when_its_newline_came_along() -> None:
    assert error_for(b"SUB " + b"x" * 197 + b"\n").code == "E_INVALID"


def test_bodies_are_not_lines() -> None:
    limits = CommandLimits(max_line_length=16, max_msg_size=1000)
    assert decode_one(commands.pub("t", b"b" * 1000), limits).body == b"b" * 1000


# ---------------------------------------------------------------------------
# PUB / DPUB
# ---------------------------------------------------------------------------
def test_pub() -> None:
    cmd = decode_one(commands.pub("events", b"\x00\n body"))
    assert cmd == Command(b"PUB", (b"events",), body=b"\x00\n body")
    assert cmd.topic == "events"


def test_pub_body_waits_for_all_its_bytes() -> None:
    d = CommandDecoder(LIMITS)
    d.feed(b"PUB t\n" + size(5) + b"abc")
    assert d.next_command() is None
    d.feed(b"de")
    assert d.next_command() == Command(b"PUB", (b"t",), body=b"abcde")


def test_pub_without_topic_is_e_invalid() -> None:
    assert error_for(b"PUB\n").code == "E_INVALID"


@pytest.mark.parametrize("name", ["PUB", "DPUB", "MPUB"])
def test_bad_topic_is_refused_before_the_body_size_is_read(name: str) -> None:
    line = b"%s bad$topic%s\n" % (name.encode(), b" 10" if name == "DPUB" else b"")
    assert error_for(line).code == "E_BAD_TOPIC"  # no size bytes fed at all
    assert error_for(line + size(0)).code == "E_BAD_TOPIC"
    assert error_for(line + size(-1)).code == "E_BAD_TOPIC"


@pytest.mark.parametrize("name", ["PUB", "DPUB"])
@pytest.mark.parametrize("body_size", [0, -1, -(2**31), 101, 2**31 - 1])
def test_pub_dpub_bad_body_size_is_e_bad_message(name: str, body_size: int) -> None:
    line = b"PUB t\n" if name == "PUB" else b"DPUB t 10\n"
    err = error_for(line + size(body_size))  # refused on the size alone, no body read
    assert err.code == "E_BAD_MESSAGE"


@pytest.mark.parametrize("name", ["PUB", "DPUB"])
def test_pub_dpub_body_at_max_msg_size_is_accepted(name: str) -> None:
    raw = commands.pub("t", b"m" * 100) if name == "PUB" else commands.dpub("t", 1, b"m" * 100)
    assert decode_one(raw).body == b"m" * 100


def test_dpub() -> None:
    cmd = decode_one(commands.dpub("t", 1500, b"later"))
    assert cmd == Command(b"DPUB", (b"t", b"1500"), body=b"later", defer_ms=1500)


def test_dpub_defer_bounds() -> None:
    assert decode_one(commands.dpub("t", 0, b"x")).defer_ms == 0
    assert decode_one(commands.dpub("t", 60_000, b"x")).defer_ms == 60_000
    # nsqd reads an empty number as 0
    assert decode_one(b"DPUB t \n" + size(1) + b"x").defer_ms == 0


@pytest.mark.parametrize("defer", [b"-1", b"60001", b"abc", b"1.5", b"+5", b"99999999999999999999"])
def test_dpub_bad_defer_is_e_invalid_before_the_body_size(defer: bytes) -> None:
    line = b"DPUB t " + defer + b"\n"
    assert error_for(line).code == "E_INVALID"
    assert error_for(line + size(0)).code == "E_INVALID"


def test_dpub_with_default_max_req_timeout() -> None:
    hour = 60 * 60 * 1000
    assert decode_one(commands.dpub("t", hour, b"x"), CommandLimits()).defer_ms == hour
    assert error_for(b"DPUB t 3600001\n", CommandLimits()).code == "E_INVALID"


def test_dpub_without_defer_is_e_invalid() -> None:
    assert error_for(b"DPUB t\n").code == "E_INVALID"


def test_dpub_bad_topic_comes_before_bad_defer() -> None:
    assert error_for(b"DPUB bad$ abc\n").code == "E_BAD_TOPIC"


# ---------------------------------------------------------------------------
# MPUB
# ---------------------------------------------------------------------------
def test_mpub() -> None:
    cmd = decode_one(commands.mpub("t", [b"one", b"\ntwo", b"3"]))
    assert cmd == Command(b"MPUB", (b"t",), bodies=[b"one", b"\ntwo", b"3"])
    assert cmd.body is None


@pytest.mark.parametrize("body_size", [0, -1, 301])
def test_mpub_bad_body_size_is_e_bad_body_without_reading_the_body(body_size: int) -> None:
    assert error_for(b"MPUB t\n" + size(body_size)).code == "E_BAD_BODY"


def test_mpub_body_at_max_body_size_is_accepted() -> None:
    bodies = [b"a" * 100, b"b" * 100, b"c" * 84]  # 4 + 3 * 4 + 284 bytes
    raw = commands.mpub("t", bodies)
    assert len(commands.encode_mpub_body(bodies)) == 300
    assert decode_one(raw).bodies == bodies


@pytest.mark.parametrize("count", [0, -1])
def test_mpub_count_not_positive_is_e_bad_body(count: int) -> None:
    body = size(count) + size(1) + b"x"
    assert error_for(b"MPUB t\n" + size(len(body)) + body).code == "E_BAD_BODY"


def test_mpub_count_that_cannot_fit_max_body_size_is_e_bad_body() -> None:
    body = size((300 - 4) // 5 + 1) + size(1) + b"x"
    assert error_for(b"MPUB t\n" + size(len(body)) + body).code == "E_BAD_BODY"


@pytest.mark.parametrize("message_size", [0, -1, 101])
def test_mpub_bad_message_size_is_e_bad_message(message_size: int) -> None:
    body = size(2) + size(1) + b"x" + size(message_size) + b"y" * 101
    assert error_for(b"MPUB t\n" + size(len(body)) + body).code == "E_BAD_MESSAGE"


def test_mpub_with_one_oversized_message_publishes_nothing() -> None:
    d = CommandDecoder(LIMITS)
    body = commands.encode_mpub_body([b"ok", b"y" * 101])
    d.feed(b"MPUB t\n" + size(len(body)) + body + commands.nop())
    with pytest.raises(ProtocolError) as caught:
        d.next_command()
    assert caught.value.code == "E_BAD_MESSAGE"


# ---------------------------------------------------------------------------
# IDENTIFY / AUTH
# ---------------------------------------------------------------------------
def test_identify() -> None:
    assert decode_one(commands.identify({"client_id": "x"})) == Command(
        b"IDENTIFY", (), body=b'{"client_id": "x"}')


def test_auth() -> None:
    assert decode_one(commands.auth("secret")) == Command(b"AUTH", (), body=b"secret")


@pytest.mark.parametrize("name", [b"IDENTIFY", b"AUTH"])
@pytest.mark.parametrize("body_size", [0, -1, 301])
def test_identify_auth_bad_body_size_is_e_bad_body(name: bytes, body_size: int) -> None:
    assert error_for(name + b"\n" + size(body_size)).code == "E_BAD_BODY"


@pytest.mark.parametrize("name", [b"IDENTIFY", b"AUTH"])
def test_identify_auth_body_at_max_body_size_is_accepted(name: bytes) -> None:
    assert decode_one(name + b"\n" + size(300) + b"b" * 300).body == b"b" * 300


def test_identify_body_may_exceed_max_msg_size() -> None:
    assert decode_one(b"IDENTIFY\n" + size(200) + b"{" * 200).body == b"{" * 200


def test_identify_params_are_ignored() -> None:
    assert decode_one(b"IDENTIFY extra\n" + size(2) + b"{}").body == b"{}"


def test_auth_with_params_is_e_invalid() -> None:
    assert error_for(b"AUTH secret\n").code == "E_INVALID"


# ---------------------------------------------------------------------------
# the before_body hook: the broker's state checks run before anything of the body
# ---------------------------------------------------------------------------
class RecordingHook:
    def __init__(self, refuse: set[bytes] = frozenset()) -> None:
        self.calls: list[bytes] = []
        self.refuse = refuse

    def __call__(self, name: bytes) -> None:
        self.calls.append(name)
        if name in self.refuse:
            raise ProtocolError("E_INVALID", f"cannot {name.decode()} in current state")


def test_hook_is_called_once_per_body_command_only() -> None:
    hook = RecordingHook()
    d = CommandDecoder(LIMITS, before_body=hook)
    d.feed(commands.nop() + commands.identify({}) + commands.rdy(1) + commands.pub("t", b"x")
           + commands.mpub("t", [b"y"]) + commands.dpub("t", 5, b"z") + commands.auth("s"))
    assert [c.name for c in d] == [b"NOP", b"IDENTIFY", b"RDY", b"PUB", b"MPUB", b"DPUB", b"AUTH"]
    assert hook.calls == [b"IDENTIFY", b"PUB", b"MPUB", b"DPUB", b"AUTH"]


def test_hook_runs_as_soon_as_the_line_is_complete() -> None:
    hook = RecordingHook()
    d = CommandDecoder(LIMITS, before_body=hook)
    d.feed(b"IDENTIFY\n")
    assert d.next_command() is None
    assert hook.calls == [b"IDENTIFY"]


@pytest.mark.parametrize("raw", [
    b"IDENTIFY\n" + size(0),        # would be E_BAD_BODY
    b"AUTH with params\n",          # would be E_INVALID for the params
    b"PUB bad$\n",                  # would be E_BAD_TOPIC
    b"DPUB t abc\n",                # would be E_INVALID for the defer
])
def test_hook_error_wins_over_every_body_check(raw: bytes) -> None:
    name = raw.split(b"\n")[0].split(b" ")[0]
    err = error_for(raw, hook=RecordingHook(refuse={name}))
    assert err.message == f"cannot {name.decode()} in current state"


# ---------------------------------------------------------------------------
# take_unparsed: the stream's encoding changes after IDENTIFY's answer
# ---------------------------------------------------------------------------
def test_take_unparsed_returns_the_bytes_after_the_last_command() -> None:
    d = CommandDecoder(LIMITS)
    d.feed(commands.identify({"deflate": True}) + b"\x78\x9c compressed")
    assert d.next_command().name == b"IDENTIFY"
    assert d.buffered == len(b"\x78\x9c compressed")
    assert d.take_unparsed() == b"\x78\x9c compressed"
    assert d.buffered == 0
    assert d.take_unparsed() == b""


def test_decoder_keeps_working_after_take_unparsed() -> None:
    d = CommandDecoder(LIMITS)
    d.feed(b"partial line")
    assert d.next_command() is None
    assert d.take_unparsed() == b"partial line"
    d.feed(commands.nop())
    assert d.next_command() == Command(b"NOP", ())
