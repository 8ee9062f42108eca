"""The pure parts of the connector: options, offsets, the ledger of held messages, MPUB
chunks and the bodies taken from Arrow batches."""
from __future__ import annotations

import subprocess
import sys

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from nsq_protocol.message import encode_message
from nsq_spark.ledger import Held, Ledger
from nsq_spark.offsets import Position, messages_between
from nsq_spark.options import OptionError, SinkOptions, SourceOptions, parse_options
from nsq_spark.publish import BadRowError, arrow_bodies, mpub_chunks
from nsq_spark.schema import ARROW_SCHEMA, record_batch

SOURCE = {"topic": "events", "channel": "spark", "nsqd_tcp_addresses": "127.0.0.1:4150"}


# -- options -------------------------------------------------------------------------
def test_option_names_in_any_spelling_and_go_durations() -> None:
    options = parse_options(SourceOptions, {**SOURCE, "nsqdTcpAddresses": "a:1, b:2", "MAX-IN-FLIGHT": "10",
                                            "msg_timeout": "1m30s", "touchInterval": "45", "tls_v1": "true"})
    assert options.nsqd_tcp_addresses == ("a:1", "b:2")
    assert (options.max_in_flight, options.msg_timeout, options.touch_interval) == (10, 90.0, 45.0)
    config = options.connection_config()
    assert (config.tls_v1, config.max_in_flight, config.msg_timeout) == (True, 10, 90.0)


@pytest.mark.parametrize("raw, message", [
    ({"channel": "c", "nsqd_tcp_addresses": "a:1"}, "nsq option 'topic' is required"),
    ({"topic": "t", "channel": "c"}, "give nsqd_tcp_addresses or lookupd_http_addresses"),
    ({**SOURCE, "topic": "bad topic"}, "nsq option 'topic': 'bad topic' is not a valid NSQ topic name"),
    ({**SOURCE, "nsqd_tcp_addresses": "nohost"}, "nsq option 'nsqd_tcp_addresses': 'nohost' is not a host:port"),
    ({**SOURCE, "max_in_flight": "0"}, "nsq option 'max_in_flight'"),
    ({**SOURCE, "maxInFlite": "5"}, "nsq option 'maxInFlite' is unknown"),
    ({**SOURCE, "msg_timeout": "soon"}, "nsq option 'msg_timeout'"),
    ({**SOURCE, "msg_timeout": "2s", "touch_interval": "2s"}, "touch_interval (2s) must be shorter"),
    ({**SOURCE, "deflate_level": "12"}, "nsq option 'deflate_level': deflate_level must be within [1, 9]"),
    ({**SOURCE, "batch_transfer": "broadcast"}, "nsq option 'batch_transfer'"),
    ({**SOURCE, "batch_server_address": "10.0.0.5:http"}, "nsq option 'batch_server_address': invalid port"),
])
def test_a_bad_option_is_named(raw: dict[str, str], message: str) -> None:
    with pytest.raises(OptionError) as err:
        parse_options(SourceOptions, raw)
    assert message in str(err.value)


def test_spark_s_own_writer_options_are_not_mistaken_for_nsq_options() -> None:
    options = parse_options(SinkOptions, {"topic": "t", "nsqd_tcp_addresses": "a:1",
                                          "checkpointLocation": "/tmp/x", "path": "ignored"})
    assert (options.body_column, options.max_mpub_messages) == ("body", 1000)


# -- offsets -------------------------------------------------------------------------
def test_offsets_round_trip_and_ranges_belong_to_one_session() -> None:
    here = Position("now", 7, 2)
    assert Position.from_json(here.to_json()) == here
    assert messages_between(Position("now", 3), here, "now") == (3, 7)
    assert messages_between(Position("before", 90), here, "now") == (0, 7)  # restart: from our first
    assert messages_between(Position("before", 1), Position("before", 9), "now") == (0, 0)  # replay: nothing
    with pytest.raises(ValueError, match="not an offset of the nsq source"):
        Position.from_json({"partition": 3})


# -- ledger --------------------------------------------------------------------------
def msg_id(name: str) -> bytes:
    return name.encode().ljust(16, b"-")


def frame(name: str) -> bytes:
    return encode_message(msg_id(name), len(name), 1, b"body of " + name.encode())


def add(ledger: Ledger[str], name: str, conn: str = "c1") -> int:
    return ledger.add([frame(name)], conn)


def ids(*names: str) -> list[bytes]:
    return [msg_id(name) for name in names]


def test_ledger_numbers_in_arrival_order_and_releases_in_order() -> None:
    ledger: Ledger[str] = Ledger()
    assert [add(ledger, x) for x in "abcde"] == [1, 2, 3, 4, 5]
    held = ledger.between(1, 4)
    assert held.frames == [frame("b"), frame("c"), frame("d")] and held.ids == ids("b", "c", "d")
    assert ledger.release_through(2).ids == ids("a", "b")
    assert ledger.release_through(2).ids == []
    assert ledger.between(2, 5).ids == ids("c", "d", "e")
    with pytest.raises(LookupError):
        ledger.between(1, 3)  # already released
    with pytest.raises(LookupError):
        ledger.between(4, 6)  # not received yet
    assert ledger.drop_after(3).ids == ids("d", "e")
    assert add(ledger, "f") == 4  # a dropped number is given again
    assert list(ledger) == ids("c", "f")
    assert ledger.add([frame("g"), frame("h")], "c2") == 6  # a run of deliveries at once
    assert ledger.held().conns == ["c1", "c1", "c2", "c2"]


def test_held_messages_are_answered_per_connection_in_order() -> None:
    ledger: Ledger[str] = Ledger()
    for name, conn in [("a", "n1"), ("b", "n2"), ("c", "n1"), ("d", "n1"), ("e", "n2")]:
        add(ledger, name, conn)
    assert ledger.release_through(4).by_conn() == {"n1": ids("a", "c", "d"), "n2": ids("b")}
    assert ledger.held().by_conn() == {"n2": ids("e")}


@given(st.lists(st.sampled_from(["add", "release", "drop"]), max_size=60), st.data())
def test_ledger_holds_exactly_what_was_added_and_not_released(steps: list[str], data: st.DataObject) -> None:
    ledger: Ledger[str] = Ledger()
    model: list[bytes] = []   # the model: what is held, in order
    first = 1                 # the number of model[0]
    counter = 0
    for step in steps:
        if step == "add":
            counter += 1
            assert add(ledger, str(counter)) == first + len(model)
            model.append(msg_id(str(counter)))
        elif step == "release":
            through = data.draw(st.integers(0, first + len(model) + 2))
            n = max(0, min(through, first + len(model) - 1) - first + 1)
            assert ledger.release_through(through).ids == model[:n]
            model, first = model[n:], first + n
        else:
            after = data.draw(st.integers(0, first + len(model) + 2))
            keep = max(0, min(len(model), after - first + 1))
            assert ledger.drop_after(after).ids == model[keep:]
            model = model[:keep]
        assert list(ledger) == model
        assert ledger.held().frames == [frame(i.rstrip(b"-").decode()) for i in model]
        assert (ledger.released, ledger.received) == (first - 1, first - 1 + len(model))


# -- rows ------------------------------------------------------------------------------
class Conn:
    def __init__(self, address: str) -> None:
        self.address = address


CONNS = [Conn("127.0.0.1:4150"), Conn("[::1]:4250")]


@given(st.lists(st.tuples(st.integers(0, 2**63 - 1), st.integers(0, 2**16 - 1),
                          st.binary(min_size=16, max_size=16).map(lambda b: bytes(c % 128 for c in b)),
                          st.binary(min_size=1, max_size=64), st.sampled_from(CONNS)), max_size=40))
def test_rows_are_cut_out_of_the_frames_exactly(messages: list[tuple[int, int, bytes, bytes, Conn]]) -> None:
    held: Held[Conn] = Held([encode_message(i, ts, att, body) for ts, att, i, body, _ in messages],
                            [conn for *_, conn in messages])
    batch = record_batch(held, "topic", "chan")
    assert batch.schema == ARROW_SCHEMA
    micros = batch.column("timestamp").cast(pa.int64()).to_pylist()
    assert [(r["id"], r["body"], m, r["attempts"], r["nsqd_address"], r["topic"], r["channel"])
            for r, m in zip(batch.to_pylist(), micros)] == \
        [(i.decode(), body, ts // 1000, att, conn.address, "topic", "chan") for ts, att, i, body, conn in messages]


# -- MPUB chunks and bodies ------------------------------------------------------------
def test_chunks_are_bounded_by_count_and_by_bytes() -> None:
    bodies = [b"x" * 100] * 25
    assert [len(c) for c in mpub_chunks(bodies, 10, 1_000_000)] == [10, 10, 5]
    # 4 bytes of count, then 4 + 100 per message: 9 messages fit in 940 bytes, not 10
    assert [len(c) for c in mpub_chunks(bodies, 100, 940)] == [9, 9, 7]
    assert [len(c) for c in mpub_chunks([b"y" * 5000, b"z"], 100, 1024)] == [1, 1]  # alone when too big
    assert [b for c in mpub_chunks(bodies, 7, 500) for b in c] == bodies


def test_an_empty_body_is_refused() -> None:
    with pytest.raises(BadRowError, match="empty body"):
        list(mpub_chunks([b"a", b""], 10, 10_000))


def test_bodies_come_from_binary_or_string_columns() -> None:
    binary = pa.record_batch({"body": pa.array([b"a", b"\xff"], pa.binary()), "n": [1, 2]})
    text = pa.record_batch({"text": pa.array(["é", "b"], pa.string())})
    large = pa.record_batch({"text": pa.array(["c"], pa.large_string())})
    assert list(arrow_bodies([binary], "body")) == [b"a", b"\xff"]
    assert list(arrow_bodies([text, large], "text")) == ["é".encode(), b"b", b"c"]
    with pytest.raises(BadRowError, match="null"):
        list(arrow_bodies([pa.record_batch({"body": pa.array([b"a", None], pa.binary())})], "body"))
    with pytest.raises(BadRowError, match="no column 'body'"):
        list(arrow_bodies([text], "body"))


# -- import weight ----------------------------------------------------------------------
def test_import_nsq_spark_leaves_the_http_client_out() -> None:
    """Spark starts several Python processes per query, each importing the connector:
    aiohttp (lookupd, the producer pool) is loaded only where it is used."""
    probe = "import sys, nsq_spark, nsq_spark.reader; print(sorted(m for m in ('aiohttp', 'nsq_client.admin') if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "[]", done.stdout
