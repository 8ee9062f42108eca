"""The decoder's batch paths (runs of FINs, runs of PUBs): they take only what the general
path would decode into the same commands, and leave everything else to it."""
from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nsq_protocol import ProtocolError, commands
from nsq_protocol.commands import Command, CommandDecoder, CommandLimits
from tests.protocol.protocol_strategies import chunked

LIMITS = CommandLimits(max_msg_size=64, max_body_size=256, max_req_timeout_ms=60_000, max_line_length=160)
IDS = [b"%016x" % n for n in range(1, 9)]
A, B = IDS[0], IDS[1]


def decoder(*chunks: bytes) -> CommandDecoder:
    d = CommandDecoder(LIMITS)
    for chunk in chunks:
        d.feed(chunk)
    return d


# -- FIN runs ------------------------------------------------------------------------------
def test_takes_the_leading_fins_of_known_ids_and_leaves_the_rest() -> None:
    d = decoder(commands.fin(A) + commands.fin(B) + commands.nop() + commands.fin(A))
    assert d.take_fins({A, B}) == [A, B]
    assert d.take_fins({A, B}) == []
    assert d.next_command() == Command(b"NOP", ())
    assert d.take_fins({A, B}) == [A]
    assert d.buffered == 0


def test_a_fin_of_an_unknown_id_is_left_to_the_general_path() -> None:
    d = decoder(commands.fin(A) + commands.fin(IDS[5]) + commands.fin(B))
    assert d.take_fins({A, B}) == [A]
    assert d.next_command() == Command(b"FIN", (IDS[5],))
    assert d.take_fins({A, B}) == [B]


def test_a_lone_fin_is_taken_when_its_id_is_in_flight_and_left_otherwise() -> None:
    assert decoder(commands.fin(A)).take_fins({A}) == [A]
    d = decoder(commands.fin(B))
    assert d.take_fins({A}) == []
    assert d.next_command() == Command(b"FIN", (B,))
    # after a body too long to join, the decoder holds a bytearray: the ID still comes as bytes
    d = CommandDecoder(CommandLimits(max_msg_size=1 << 20, max_body_size=1 << 20))
    d.feed(commands.pub("t", b"x" * (300 * 1024))[:1000])
    assert d.next_command() is None
    d.feed(commands.pub("t", b"x" * (300 * 1024))[1000:] + commands.fin(A))
    assert d.next_command() == Command(b"PUB", (b"t",), body=b"x" * (300 * 1024))
    (taken,) = d.take_fins({A})
    assert type(taken) is bytes and taken == A and d.buffered == 0


@pytest.mark.parametrize("line", [
    b"FIN " + A + b"\r\n",          # a CR before the newline
    b"FIN  " + A[:15] + b"\n",      # the same length, but not one ID
    b"fin " + A + b"\n",
    b"FIN " + A + b" 1\n",          # an extra parameter
])
def test_anything_but_an_exact_fin_line_is_left_to_the_general_path(line: bytes) -> None:
    d = decoder(line)
    assert d.take_fins({A, A[:15]}) == []  # in-flight IDs never hold a space or a newline
    assert d.next_command() is not None


def test_an_incomplete_fin_line_waits_for_the_rest() -> None:
    whole = commands.fin(A) + commands.fin(B)
    d = decoder(whole[:30])
    assert d.take_fins({A, B}) == [A]
    assert d.take_fins({A, B}) == []
    d.feed(whole[30:])
    assert d.take_fins({A, B}) == [B]


def test_no_fins_are_taken_while_a_body_is_pending() -> None:
    d = decoder(commands.pub("t", b"body")[:-2])
    assert d.next_command() is None
    d.feed(b"dy" + commands.fin(A))
    assert d.take_fins({A}) == []
    assert d.next_command() == Command(b"PUB", (b"t",), body=b"body")
    assert d.take_fins({A}) == [A]


# -- PUB runs ------------------------------------------------------------------------------
def test_the_first_pub_to_a_topic_goes_through_the_checks_then_runs_are_taken() -> None:
    d = decoder(b"".join(commands.pub("t", b"m%d" % i) for i in range(4)))
    assert d.take_pubs() is None  # "t" not checked yet on this stream
    assert d.next_command() == Command(b"PUB", (b"t",), body=b"m0")
    assert d.take_pubs() == (b"t", [b"m1", b"m2", b"m3"])
    assert d.buffered == 0


def test_a_pub_run_stops_at_another_topic_and_at_a_size_the_checks_refuse() -> None:
    d = decoder(commands.pub("t", b"first") + commands.pub("t", b"a") + commands.pub("u", b"b")
                + commands.pub("t", b"c") + commands.pub("t", b"x" * 65))
    d.next_command()
    assert d.take_pubs() == (b"t", [b"a"])
    assert d.take_pubs() is None
    assert d.next_command() == Command(b"PUB", (b"u",), body=b"b")
    assert d.take_pubs() == (b"t", [b"c"])
    with pytest.raises(ProtocolError) as caught:
        d.next_command()
    assert caught.value.code == "E_BAD_MESSAGE"


def test_a_pub_whose_body_has_not_all_arrived_is_not_taken() -> None:
    stream = commands.pub("t", b"first") + commands.pub("t", b"second")
    d = decoder(stream[:-3])
    d.next_command()
    assert d.take_pubs() is None
    d.feed(stream[-3:])
    assert d.take_pubs() == (b"t", [b"second"])


# -- the batch paths never change what a stream means ---------------------------------------
fin_lines = st.sampled_from(IDS).map(commands.fin)
other_lines = st.sampled_from([commands.nop(), commands.rdy(5), b"FIN " + A + b"\r\n",
                               commands.touch(B), commands.req(A, 10)])
pubs = st.builds(commands.pub, st.sampled_from(["t", "u"]), st.binary(min_size=1, max_size=64))
bad_pub = st.sampled_from([b"PUB t\n" + struct.pack(">i", 0), b"PUB t\n" + struct.pack(">i", 65)])
streams = st.lists(st.one_of(fin_lines, fin_lines, pubs, pubs, other_lines, bad_pub), max_size=30)


def plain(chunks: list[bytes]) -> tuple[list[Command], str | None]:
    d = CommandDecoder(LIMITS)
    got: list[Command] = []
    try:
        for chunk in chunks:
            d.feed(chunk)
            while (cmd := d.next_command()) is not None:
                got.append(cmd)
    except ProtocolError as err:
        return got, err.code
    return got, None


def batched(chunks: list[bytes], known: set[bytes]) -> tuple[list[Command], str | None]:
    d = CommandDecoder(LIMITS)
    got: list[Command] = []
    try:
        for chunk in chunks:
            d.feed(chunk)
            while True:
                got += [Command(b"FIN", (msg_id,)) for msg_id in d.take_fins(known)]
                run = d.take_pubs()
                if run is not None:
                    got += [Command(b"PUB", (run[0],), body=body) for body in run[1]]
                    continue
                cmd = d.next_command()
                if cmd is None:
                    break
                got.append(cmd)
    except ProtocolError as err:
        return got, err.code
    return got, None


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), streams, st.sets(st.sampled_from(IDS)))
def test_batch_paths_decode_every_stream_as_the_general_path_does(
        data: st.DataObject, parts: list[bytes], known: set[bytes]) -> None:
    chunks = data.draw(chunked(b"".join(parts)))
    assert batched(chunks, known) == plain(chunks)


# -- MPUB bodies of one size ---------------------------------------------------------------
def _each(body: bytes, max_msg_size: int) -> list[bytes] | str:
    """The general reading of an MPUB body (every message in turn), or its error's code."""
    try:
        count = commands._SIZE.unpack_from(body)[0]
        if count <= 0:
            raise ProtocolError("E_BAD_BODY", "count")
        return commands._each_body(body, count, max_msg_size)
    except (ProtocolError, struct.error) as e:
        return getattr(e, "code", "E_BAD_BODY")


def _parsed(body: bytes, max_msg_size: int) -> list[bytes] | str:
    try:
        return commands.parse_mpub_body(body, max_msg_size)
    except ProtocolError as e:
        return e.code


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(size=st.integers(0, 12), count=st.integers(1, 6), data=st.data())
def test_mpub_bodies_of_one_size_read_as_each_one_in_turn(size: int, count: int, data: st.DataObject) -> None:
    """Batches of one size, then the same with any byte changed, cut or extended: the
    same-size path gives what reading every message in turn gives, errors included."""
    body = commands.encode_mpub_body([bytes([i]) * size for i in range(count)]) if size else \
        struct.pack(">I", count) + struct.pack(">I", 0) * count
    if size and count >= 2:  # the same-size path takes it
        assert commands._same_size_bodies(body, count, size) == [bytes([i]) * size for i in range(count)]
    variants = [body]
    at = data.draw(st.integers(0, len(body) - 1))
    variants.append(body[:at] + bytes([data.draw(st.integers(0, 255))]) + body[at + 1:])
    variants.append(body[:at])
    variants.append(body + data.draw(st.binary(min_size=1, max_size=8)))
    for variant in variants:
        for max_msg_size in (size, max(size - 1, 0), 64):
            expected = _each(variant, max_msg_size) if len(variant) >= 4 else "E_BAD_BODY"
            assert _parsed(variant, max_msg_size) == expected


@settings(max_examples=100, suppress_health_check=[HealthCheck.too_slow])
@given(size=st.integers(1, 40), count=st.sampled_from([2, 3, 100, commands._MAX_UNPACKED, commands._MAX_UNPACKED + 1]),
       index=st.integers(-5000, 5000))
def test_bodies_of_one_size_left_in_the_mpub_read_as_sliced_ones(size: int, count: int, index: int) -> None:
    """``SameSizeBodies`` (struct-unpacked, or sliced by ``map`` past the unpackers' limit)
    gives each body, by index, by slice and in turn, as the general reading does."""
    bodies = [i.to_bytes(4, "big")[-min(size, 4):].rjust(size, b"-") for i in range(count)]
    parsed = commands.parse_mpub_body(commands.encode_mpub_body(bodies), 64)
    assert isinstance(parsed, commands.SameSizeBodies) and len(parsed) == count
    assert list(parsed) == bodies and parsed == bodies and parsed == tuple(bodies) and parsed != "E_BAD_BODY"
    assert parsed[1:3] == bodies[1:3]
    if -count <= index < count:
        assert parsed[index] == bodies[index]
    else:
        with pytest.raises(IndexError):
            parsed[index]
