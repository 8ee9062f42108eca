"""lookupd's protocol V1: the peer's encoders, lookupd's streaming command decoder, the
answer codec, and the checks on REGISTER/UNREGISTER params and IDENTIFY bodies."""
from __future__ import annotations

import json
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nsq_protocol import ProtocolError
from nsq_protocol import lookup_v1 as v1
from nsq_protocol.lookup_v1 import V1Command, V1CommandDecoder, V1ResponseDecoder
from tests.protocol.protocol_strategies import chunked, mutated, names

FAST = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
PEER = {"broadcast_address": "10.0.0.7", "hostname": "box", "tcp_port": 4150, "http_port": 4151,
        "version": "1.3.0"}


def size(n: int) -> bytes:
    return struct.pack(">i", n)


def decode(data: bytes, **kw: object) -> list[V1Command]:
    d = V1CommandDecoder(**kw)  # type: ignore[arg-type]
    d.feed(data)
    return list(d)


def error_of(data: bytes, **kw: object) -> ProtocolError:
    d = V1CommandDecoder(**kw)  # type: ignore[arg-type]
    d.feed(data)
    with pytest.raises(ProtocolError) as caught:
        while d.next_command() is not None:
            pass
    return caught.value


# ---------------------------------------------------------------------------
# encoders (what nsqd sends)
# ---------------------------------------------------------------------------
def test_line_encoders_write_nsqs_bytes() -> None:
    assert v1.ping() == b"PING\n"
    assert v1.register("t") == b"REGISTER t\n"
    assert v1.register("t", "c#ephemeral") == b"REGISTER t c#ephemeral\n"
    assert v1.unregister("t") == b"UNREGISTER t\n"
    assert v1.unregister("t", "c") == b"UNREGISTER t c\n"


def test_identify_is_a_line_then_a_sized_json_body() -> None:
    data = v1.identify(PEER)
    assert data.startswith(b"IDENTIFY\n")
    (n,) = struct.unpack(">I", data[9:13])
    assert n == len(data) - 13
    assert json.loads(data[13:]) == PEER


def test_answers_are_size_prefixed_without_a_frame_type() -> None:
    assert v1.encode_response(b"OK") == b"\x00\x00\x00\x02OK"
    assert v1.encode_response(b"") == b"\x00\x00\x00\x00"


def test_response_decoder_reassembles_answers_from_single_bytes() -> None:
    stream = v1.encode_response(b"OK") + v1.encode_response(b"E_INVALID x") + v1.encode_response(b"")
    d = V1ResponseDecoder()
    got = []
    for i in range(len(stream)):
        d.feed(stream[i:i + 1])
        got.extend(d)
    assert got == [b"OK", b"E_INVALID x", b""]
    assert [v1.is_error_response(a) for a in got] == [False, True, False]


def test_response_decoder_refuses_an_absurd_size() -> None:
    d = V1ResponseDecoder(max_size=10)
    d.feed(struct.pack(">I", 11))
    with pytest.raises(ProtocolError):
        d.next_response()


# ---------------------------------------------------------------------------
# lookupd's decoder
# ---------------------------------------------------------------------------
def test_magic_then_commands() -> None:
    stream = b"  V1" + v1.ping() + v1.register("t", "c") + v1.identify(PEER) + v1.unregister("t")
    ping, reg, ident, unreg = decode(stream)
    assert (ping, reg, unreg) == (V1Command(b"PING"), V1Command(b"REGISTER", (b"t", b"c")),
                                  V1Command(b"UNREGISTER", (b"t",)))
    assert (ident.name, ident.params) == (b"IDENTIFY", ())
    assert ident.body is not None and json.loads(ident.body) == PEER


def test_nothing_is_decoded_before_the_whole_magic() -> None:
    d = V1CommandDecoder()
    d.feed(b"  V")
    assert d.next_command() is None
    d.feed(b"1PING\n")
    assert d.next_command() == V1Command(b"PING")


@pytest.mark.parametrize("magic", [b"  V2", b"GET ", b"\x00\x00\x00\x00", b"  v1"])
def test_other_magic_is_e_bad_protocol_with_no_text(magic: bytes) -> None:
    err = error_of(magic + b"PING\n")
    assert err.code == "E_BAD_PROTOCOL"
    assert err.wire_text == b"E_BAD_PROTOCOL"


def test_lines_are_trimmed_like_go_then_split_on_single_spaces() -> None:
    cmds = decode(b"  PING\r\n\tREGISTER t c  \nREGISTER  t\n", expect_magic=False)
    assert cmds == [V1Command(b"PING"), V1Command(b"REGISTER", (b"t", b"c")),
                    V1Command(b"REGISTER", (b"", b"t"))]


@pytest.mark.parametrize("line", [b"BOGUS\n", b"\n", b"ping\n", b"PUB t\n"])
def test_unknown_commands_are_e_invalid(line: bytes) -> None:
    err = error_of(line, expect_magic=False)
    assert err.code == "E_INVALID"
    assert err.wire_text.startswith(b"E_INVALID invalid command")


def test_identify_body_may_arrive_a_byte_at_a_time() -> None:
    data = v1.identify(PEER)
    d = V1CommandDecoder(expect_magic=False)
    got = []
    for i in range(len(data)):
        d.feed(data[i:i + 1])
        got.extend(d)
        assert len(got) == (1 if i == len(data) - 1 else 0)
    assert json.loads(got[0].body) == PEER


@pytest.mark.parametrize("n", [-1, -(2**31), 1025])
def test_identify_body_size_out_of_range_is_e_bad_body(n: int) -> None:
    err = error_of(b"IDENTIFY\n" + size(n), expect_magic=False, max_body_size=1024)
    assert err.code == "E_BAD_BODY"


def test_before_body_hook_refuses_identify_before_its_body_is_read() -> None:
    def refuse(cmd: V1Command) -> None:
        raise ProtocolError("E_INVALID", "cannot IDENTIFY again")

    d = V1CommandDecoder(expect_magic=False, before_body=refuse)
    d.feed(b"IDENTIFY\n")  # no size yet: the refusal must not wait for it
    with pytest.raises(ProtocolError) as caught:
        d.next_command()
    assert caught.value.code == "E_INVALID"


def test_a_line_longer_than_the_limit_is_refused_with_or_without_its_newline() -> None:
    assert error_of(b"REGISTER " + b"a" * 100, expect_magic=False, max_line_length=50).code == "E_INVALID"
    assert error_of(b"REGISTER " + b"a" * 100 + b"\n", expect_magic=False, max_line_length=50).code == "E_INVALID"


# ---------------------------------------------------------------------------
# params and bodies
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("params,expected", [
    ((b"t",), ("t", None)),
    ((b"t", b"c"), ("t", "c")),
    ((b"t", b""), ("t", None)),
    ((b"t", b"c", b"extra"), ("t", "c")),
    ((b"t#ephemeral", b"c#ephemeral"), ("t#ephemeral", "c#ephemeral")),
])
def test_topic_and_optional_channel(params: tuple[bytes, ...], expected: tuple[str, str | None]) -> None:
    assert v1.parse_topic_channel(V1Command(b"REGISTER", params)) == expected


@pytest.mark.parametrize("params,code", [
    ((), "E_INVALID"),
    ((b"bad$name",), "E_BAD_TOPIC"),
    ((b"",), "E_BAD_TOPIC"),
    ((b"a" * 65,), "E_BAD_TOPIC"),
    ((b"t", b"bad$name"), "E_BAD_CHANNEL"),
])
def test_bad_topic_channel_params(params: tuple[bytes, ...], code: str) -> None:
    with pytest.raises(ProtocolError) as caught:
        v1.parse_topic_channel(V1Command(b"UNREGISTER", params))
    assert caught.value.code == code
    assert caught.value.wire_text.startswith(code.encode() + b" UNREGISTER")


def test_peer_identity_reads_nsqds_json_and_ignores_unknown_keys() -> None:
    peer = v1.decode_peer_identity(json.dumps({**PEER, "extra": [1]}).encode())
    assert (peer.broadcast_address, peer.hostname, peer.tcp_port, peer.http_port, peer.version) == (
        "10.0.0.7", "box", 4150, 4151, "1.3.0")


@pytest.mark.parametrize("body", [b"", b"{", b"[]", b'"x"', b"\xff\xfe",
                                  json.dumps({**PEER, "tcp_port": "4150"}).encode(),
                                  json.dumps({**PEER, "tcp_port": 4150.5}).encode(),
                                  json.dumps({**PEER, "version": 1}).encode()])
def test_peer_identity_that_is_not_the_right_json_is_e_bad_body(body: bytes) -> None:
    with pytest.raises(ProtocolError) as caught:
        v1.decode_peer_identity(body)
    assert caught.value.code == "E_BAD_BODY"


@pytest.mark.parametrize("missing", ["broadcast_address", "tcp_port", "http_port", "version"])
def test_peer_identity_requires_the_fields_lookupd_needs(missing: str) -> None:
    with pytest.raises(ProtocolError) as caught:
        v1.decode_peer_identity(json.dumps({k: v for k, v in PEER.items() if k != missing}).encode())
    assert caught.value.wire_text == b"E_BAD_BODY IDENTIFY missing fields"


def test_peer_identity_hostname_is_optional() -> None:
    assert v1.decode_peer_identity(json.dumps({**PEER, "hostname": None}).encode()).hostname == ""


# ---------------------------------------------------------------------------
# properties
# ---------------------------------------------------------------------------
peer_infos = st.fixed_dictionaries({
    "broadcast_address": st.text("abc.0123", min_size=1, max_size=12),
    "hostname": st.text(max_size=12),
    "tcp_port": st.integers(1, 65535), "http_port": st.integers(1, 65535),
    "version": st.text("0123456789.", min_size=1, max_size=8),
})
peer_commands = st.one_of(
    st.just((v1.ping(), V1Command(b"PING"))),
    st.builds(lambda t: (v1.register(t), V1Command(b"REGISTER", (t.encode(),))), names()),
    st.builds(lambda t, c: (v1.register(t, c), V1Command(b"REGISTER", (t.encode(), c.encode()))), names(), names()),
    st.builds(lambda t: (v1.unregister(t), V1Command(b"UNREGISTER", (t.encode(),))), names()),
    st.builds(lambda t, c: (v1.unregister(t, c), V1Command(b"UNREGISTER", (t.encode(), c.encode()))),
              names(), names()),
    st.builds(lambda p: (v1.identify(p), V1Command(b"IDENTIFY", (), json.dumps(p, separators=(",", ":")).encode())),
              peer_infos),
)


@FAST
@given(st.lists(peer_commands, min_size=1, max_size=8).flatmap(
    lambda cmds: st.tuples(st.just(cmds), chunked(b"  V1" + b"".join(data for data, _ in cmds)))))
def test_decode_of_encoded_commands_is_identity_however_the_stream_is_cut(case) -> None:  # type: ignore[no-untyped-def]
    cmds, chunks = case
    d = V1CommandDecoder()
    got: list[V1Command] = []
    for chunk in chunks:
        d.feed(chunk)
        got.extend(d)
    assert got == [expected for _, expected in cmds]


@FAST
@given(st.lists(peer_commands, min_size=1, max_size=6).flatmap(
    lambda cmds: mutated(b"  V1" + b"".join(data for data, _ in cmds))).flatmap(chunked))
def test_garbage_only_ever_raises_protocol_error(chunks: list[bytes]) -> None:
    d = V1CommandDecoder(max_line_length=200, max_body_size=300)
    fed = 0
    try:
        for chunk in chunks:
            d.feed(chunk)
            fed += len(chunk)
            for n, cmd in enumerate(d, start=1):
                assert n <= fed, "every command consumes at least its newline"
                if cmd.name in (b"REGISTER", b"UNREGISTER"):
                    try:
                        v1.parse_topic_channel(cmd)
                    except ProtocolError:
                        pass
                if cmd.body is not None:
                    try:
                        v1.decode_peer_identity(cmd.body)
                    except ProtocolError:
                        pass
    except ProtocolError as err:
        assert err.code in ("E_BAD_PROTOCOL", "E_INVALID", "E_BAD_BODY")


@FAST
@given(st.lists(st.binary(max_size=40), max_size=6).flatmap(
    lambda answers: st.tuples(st.just(answers), chunked(b"".join(v1.encode_response(a) for a in answers)))))
def test_answers_survive_any_cut(case) -> None:  # type: ignore[no-untyped-def]
    answers, chunks = case
    d = V1ResponseDecoder()
    got: list[bytes] = []
    for chunk in chunks:
        d.feed(chunk)
        got.extend(d)
    assert got == answers
