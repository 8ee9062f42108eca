"""The replication link's frames: what is encoded decodes to the same values, split
anywhere across reads; garbage raises WireError and nothing else; a log cut short
replays only its whole frames."""
from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from nsqd.replication import wire
from nsqd.payload_run import PayloadRun
from nsqd.replication.wire import AdoptRequest, Entry, Kind, WireError

names = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=40)
ids = st.binary(min_size=16, max_size=16)
entries = st.builds(Entry, st.binary(min_size=26, max_size=300), st.integers(0, 2**63 - 1))

frames = st.one_of(
    st.builds(lambda n, g: (wire.hello(n, g), (Kind.HELLO, n, g, "")), names, st.integers(0, 2**64 - 1)),
    st.builds(lambda n, g, i: (wire.hello(n, g, i), (Kind.HELLO, n, g, i)), names, st.integers(1, 2**64 - 1),
              names),
    st.builds(lambda s, t, e: (wire.append(s, t, e), (Kind.APPEND, s, t, e)),
              st.integers(0, 2**64 - 1), names, st.lists(entries, max_size=5)),
    st.builds(lambda s, t, p, d: (wire.append_fresh(s, t, p, d), (Kind.APPEND_RUN, s, t, [Entry(x, d) for x in p])),
              st.integers(0, 2**64 - 1), names, st.lists(st.binary(min_size=26, max_size=120), max_size=5),
              st.integers(0, 2**64 - 1)),
    st.builds(lambda s: (wire.ack(s), (Kind.ACK, s)), st.integers(0, 2**64 - 1)),
    st.builds(lambda t, c, i: (wire.fin(t, c, i), (Kind.FIN, t, c, i)), names, names, st.lists(ids, max_size=5)),
    st.builds(lambda t, c: (wire.channels(t, c), (Kind.CHANNELS, t, c)), names, st.lists(names, max_size=4)),
    st.just((wire.ping(), (Kind.PING, 0))),
    st.builds(lambda t: (wire.ping(t), (Kind.PING, t)), st.integers(0, 2**64 - 1)),
    st.builds(lambda t, a: (wire.ping(t, a), (Kind.PING, t, a) if a else (Kind.PING, t)), st.integers(0, 2**64 - 1),
              st.lists(st.builds(AdoptRequest, names, st.integers(0, 2**64 - 1), st.booleans()), max_size=3)),
    st.builds(lambda s, o, g: (wire.pull(s, o, g), (Kind.PULL, s, o, g)), st.integers(0, 2**64 - 1), names,
              st.integers(0, 2**64 - 1)),
    st.builds(lambda s: (wire.done(s), (Kind.DONE, s)), st.integers(0, 2**64 - 1)),
    st.builds(lambda g, k: (wire.welcome(g, k), (Kind.WELCOME, g, k)), st.integers(0, 2**64 - 1), st.booleans()),
    st.just((wire.reset(), (Kind.RESET,))),
    st.builds(lambda s: (wire.synced(s), (Kind.SYNCED, s)), st.integers(0, 2**64 - 1)),
    st.builds(lambda o, g: (wire.drop(o, g), (Kind.DROP, o, g)), names, st.integers(0, 2**64 - 1)),
    # the channels' state beyond FIN (frames added after the first logs were written)
    st.builds(lambda t, c, i: (wire.empty(t, c, i), (Kind.EMPTY, t, c, i)), names, names, st.lists(ids, max_size=5)),
    st.builds(lambda t, c, p: (wire.pause(t, c, p), (Kind.PAUSE, t, c, p)), names, names, st.booleans()),
    st.builds(lambda t, c, d, i: (wire.req(t, c, d, i), (Kind.REQ, t, c, d, i)), names, names,
              st.integers(0, 2**64 - 1), st.lists(ids, max_size=5)),
)


def values(frame: wire.Frame) -> tuple:
    k = frame.kind
    if k is Kind.HELLO:
        return (k, frame.name, frame.generation, frame.incarnation)
    if k in (Kind.APPEND, Kind.APPEND_RUN):
        return (k, frame.seq, frame.topic, frame.messages())
    if k in (Kind.ACK, Kind.DONE, Kind.SYNCED):
        return (k, frame.seq)
    if k is Kind.FIN:
        return (k, frame.topic, frame.channel, frame.ids)
    if k is Kind.CHANNELS:
        return (k, frame.topic, frame.channels)
    if k is Kind.PULL:
        return (k, frame.seq, frame.name, frame.generation)
    if k is Kind.WELCOME:
        return (k, frame.generation, frame.keeps_log)
    if k is Kind.DROP:
        return (k, frame.name, frame.generation)
    if k is Kind.EMPTY:
        return (k, frame.topic, frame.channel, frame.ids)
    if k is Kind.PAUSE:
        return (k, frame.topic, frame.channel, frame.paused)
    if k is Kind.REQ:
        return (k, frame.topic, frame.channel, frame.due_ms, frame.ids)
    if k is Kind.PING:
        return (k, frame.clock_ms, frame.adopt) if frame.adopt else (k, frame.clock_ms)
    return (k,)


@settings(max_examples=200)
@given(st.lists(frames, max_size=8), st.lists(st.integers(1, 64), max_size=10))
def test_frames_decode_to_what_was_encoded_however_the_bytes_are_split(encoded, cuts) -> None:
    data = b"".join(raw for raw, _ in encoded)
    decoder = wire.Decoder()
    out = []
    at = 0
    for cut in cuts:
        decoder.feed(data[at:at + cut])
        at += cut
        out += decoder.frames_with_bytes()
    decoder.feed(data[at:])
    out += decoder.frames_with_bytes()
    assert [values(f) for f, _ in out] == [want for _, want in encoded]
    assert [raw for _, raw in out] == [raw for raw, _ in encoded]
    assert decoder.buffered == 0


def test_pulled_carries_one_inner_frame() -> None:
    inner = wire.fin("t", "c", [b"0" * 16])
    [frame] = _decode(wire.pulled("127.0.0.9:1", inner))
    assert frame.kind is Kind.PULLED and frame.name == "127.0.0.9:1"
    assert frame.inner is not None and values(frame.inner) == (Kind.FIN, "t", "c", [b"0" * 16])
    for state in (wire.empty("t", "c", [b"1" * 16]), wire.pause("t", "", True), wire.req("t", "c", 5, [])):
        [frame] = _decode(wire.pulled("o", state))
        assert frame.inner is not None and frame.inner.topic == "t"
    with pytest.raises(WireError):
        _decode(wire.pulled("o", wire.ping()))


def _grown(frame: bytes, extra: bytes) -> bytes:
    """``frame`` with ``extra`` after its body, as a later version might send it."""
    return (len(frame) - 4 + len(extra)).to_bytes(4, "big") + frame[4:] + extra


def test_handshake_and_ping_frames_may_grow_and_every_other_frame_is_read_whole() -> None:
    """HELLO, WELCOME and PING with fields this version does not know are read for the
    fields it knows (a later version can add one without an older peer closing the
    link); any other frame with bytes after its body is refused."""
    extra = b"\x00\x00\x00\x00\x00\x00\x00\x07later"
    assert values(_decode(_grown(wire.hello("n", 3, "life"), extra))[0]) == (Kind.HELLO, "n", 3, "life")
    assert values(_decode(_grown(wire.welcome(2, True), extra))[0]) == (Kind.WELCOME, 2, True)
    assert values(_decode(_grown(wire.ping(5), extra))[0]) == (Kind.PING, 5)
    assert values(_decode(_grown(wire.ping(), b"\x01"))[0]) == (Kind.PING, 0)  # too short for a clock
    asks = [AdoptRequest("owner:1", 4, True)]
    assert values(_decode(_grown(wire.ping(5, asks), extra))[0]) == (Kind.PING, 5, asks)
    for frame in (wire.ack(1), wire.fin("t", "c", []), wire.append(1, "t", []), wire.req("t", "c", 1, []),
                  wire.pull(1, "o", 1), wire.drop("o", 1), wire.channels("t", [])):
        with pytest.raises(WireError, match="bytes after"):
            _decode(_grown(frame, b"\x00"))
    with pytest.raises(WireError, match="do not add up"):  # its payloads run to the frame's end
        _decode(_grown(wire.append_fresh(1, "t", [b"m" * 26], 0), b"\x00"))


def test_a_log_from_before_the_channel_state_frames_replays_as_it_did() -> None:
    """The frames an older nsqd logged keep their bytes and meaning: the new kinds only add."""
    old = (wire.hello("o", 1) + wire.channels("t", ["c"]) + wire.append(0, "t", [Entry(b"1" * 16 + b"x" * 10)])
           + wire.fin("t", "c", [b"1" * 16]))
    assert [f.kind for f, _ in wire.raw_frames(old)] == [Kind.HELLO, Kind.CHANNELS, Kind.APPEND, Kind.FIN]
    assert (Kind.HELLO, Kind.APPEND, Kind.FIN, Kind.CHANNELS, Kind.DROP) == (1, 2, 4, 5, 13)


@settings(max_examples=300)
@given(st.binary(max_size=200))
def test_garbage_raises_wire_error_only(data: bytes) -> None:
    decoder = wire.Decoder()
    decoder.feed(data)
    try:
        decoder.frames()
    except WireError:
        pass


@given(st.lists(frames, min_size=1, max_size=6), st.data())
def test_a_torn_log_replays_its_whole_frames(encoded, data) -> None:
    raws = [raw for raw, _ in encoded]
    blob = b"".join(raws)
    cut = data.draw(st.integers(0, len(blob)))
    replayed = wire.raw_frames(blob[:cut])
    whole = 0
    while whole < len(raws) and sum(map(len, raws[:whole + 1])) <= cut:
        whole += 1
    assert [raw for _, raw in replayed] == raws[:whole]


def _decode(data: bytes) -> list[wire.Frame]:
    decoder = wire.Decoder()
    decoder.feed(data)
    return decoder.frames()


@given(st.integers(0, 2**64 - 1), names, st.lists(st.binary(min_size=26, max_size=100), max_size=12),
       st.integers(0, 2**63 - 1), st.data())
def test_a_fresh_publish_reads_as_the_entries_of_an_append_from_a_list_or_a_runs_window(
        seq, topic, payloads, due, data) -> None:
    """An owner's publish (APPEND_RUN) says what APPEND says of the same messages, whether
    nsqd queued them as separate payloads or as a window of one run."""
    start = data.draw(st.integers(0, len(payloads)))
    stop = data.draw(st.integers(start, len(payloads)))
    window = PayloadRun.of(payloads)[start:stop]
    as_entries = [Entry(p, due) for p in payloads[start:stop]]
    for batch in (payloads[start:stop], window):
        [frame] = _decode(wire.append_fresh(seq, topic, batch, due))
        assert (frame.kind, frame.seq, frame.topic, frame.messages()) == (Kind.APPEND_RUN, seq, topic, as_entries)


def _run_body(sizes: list[int], blob: bytes) -> bytes:
    head = wire._U64.pack(1) + wire._text("t") + wire._RUN_HEAD.pack(0, len(sizes))
    return head + b"".join(size.to_bytes(4, "big") for size in sizes) + blob


@pytest.mark.parametrize("sizes, blob, error", [
    ([30, 30], b"x" * 59, "do not add up"),
    ([30, 30], b"x" * 61, "do not add up"),
    ([25], b"x" * 25, "too short"),
    ([30, 2**32 - 1], b"x" * 30, "do not add up"),
])
def test_an_append_run_whose_sizes_lie_is_refused(sizes, blob, error) -> None:
    body = _run_body(sizes, blob)
    with pytest.raises(WireError, match=error):
        _decode(wire._HEAD.pack(len(body) + 1, Kind.APPEND_RUN) + body)
    count_beyond_the_frame = wire._U64.pack(1) + wire._text("t") + wire._RUN_HEAD.pack(0, 2**32 - 1)
    with pytest.raises(WireError, match="ends early"):
        _decode(wire._HEAD.pack(len(count_beyond_the_frame) + 1, Kind.APPEND_RUN) + count_beyond_the_frame)


def test_a_read_of_acks_alone_gives_the_highest_and_anything_else_none() -> None:
    assert wire.only_acks(wire.ack(7)) == 7
    assert wire.only_acks(wire.ack(7) + wire.ack(9) + wire.ack(8)) == 9
    assert wire.only_acks(b"") is None
    assert wire.only_acks(wire.ack(7)[:-1]) is None  # a torn ACK: the decoder waits for the rest
    assert wire.only_acks(wire.ack(7) + wire.done(5)) is None  # DONE has an ACK's size, not its kind
    assert wire.only_acks(wire.ack(3) + wire.ping() + wire.ping() + wire.ping()[:1]) is None
