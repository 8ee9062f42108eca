"""IDENTIFY against a real nsqd: what it answers, the bounds its flags set, and the
deflate and snappy upgrades compressing both directions of the stream."""
from __future__ import annotations

from typing import Any

import pytest

from nsq_protocol import commands as cmd
from nsqd import __version__
from tests.broker.conftest import Connect
from tests.servers import Nsqd


@pytest.fixture(scope="module")
def uncompressed(module_servers: Any) -> Nsqd:
    return module_servers.nsqd(deflate="false", snappy="false")


def test_answer_reports_the_servers_limits_and_defaults(limited: Nsqd, connect: Connect) -> None:
    answer = connect(limited).negotiate({})
    assert answer == {
        "max_rdy_count": 5,
        "version": __version__,
        "max_msg_timeout": 2000,
        "msg_timeout": 1000,
        "tls_v1": False,
        "deflate": False,
        "deflate_level": 4,  # the default 6, capped by --max-deflate-level
        "max_deflate_level": 4,
        "snappy": False,
        "sample_rate": 0,
        "auth_required": False,
        "output_buffer_size": 16384,
        "output_buffer_timeout": 100,
    }


@pytest.mark.parametrize("field,value,answer_key", [
    ("heartbeat_interval", 1000, None),
    ("heartbeat_interval", 5000, None),          # --max-heartbeat-interval
    ("output_buffer_size", 64, "output_buffer_size"),
    ("output_buffer_size", 1000, "output_buffer_size"),   # --max-output-buffer-size
    ("output_buffer_timeout", 25, "output_buffer_timeout"),  # --min-output-buffer-timeout default
    ("output_buffer_timeout", 2000, "output_buffer_timeout"),  # --max-output-buffer-timeout
    ("msg_timeout", 1000, "msg_timeout"),
    ("msg_timeout", 2000, "msg_timeout"),        # --max-msg-timeout
    ("sample_rate", 1, "sample_rate"),
    ("sample_rate", 99, "sample_rate"),
])
def test_values_within_bounds_are_taken(limited: Nsqd, connect: Connect, field: str, value: int,
                                        answer_key: str | None) -> None:
    answer = connect(limited).negotiate({field: value})
    if answer_key is not None:
        assert answer[answer_key] == value


@pytest.mark.parametrize("field,value", [
    ("heartbeat_interval", 999),
    ("heartbeat_interval", 5001),
    ("heartbeat_interval", -2),
    ("output_buffer_size", 63),
    ("output_buffer_size", 1001),
    ("output_buffer_timeout", 24),
    ("output_buffer_timeout", 2001),
    ("msg_timeout", 999),
    ("msg_timeout", 2001),
    ("sample_rate", 100),
    ("sample_rate", -1),
])
def test_values_out_of_bounds_are_e_bad_body(limited: Nsqd, connect: Connect, field: str,
                                             value: int) -> None:
    conn = connect(limited)
    conn.identify({"feature_negotiation": True, field: value})
    frame = conn.expect_fatal("E_BAD_BODY")
    assert field.replace("_", " ").split()[0].encode() in frame.data


def test_minus_one_switches_output_buffering_off(limited: Nsqd, connect: Connect) -> None:
    answer = connect(limited).negotiate({"output_buffer_size": -1})
    assert answer["output_buffer_size"] == 1
    assert answer["output_buffer_timeout"] == 0
    answer = connect(limited).negotiate({"output_buffer_timeout": -1})
    assert answer["output_buffer_timeout"] == 0


@pytest.mark.parametrize("asked,granted", [(9, 4), (1, 1), (0, 4)])
def test_deflate_level_is_capped_by_max_deflate_level(limited: Nsqd, connect: Connect,
                                                      asked: int, granted: int) -> None:
    conn = connect(limited)
    answer = conn.negotiate({"deflate": True, "deflate_level": asked})
    assert answer["deflate"] is True and answer["deflate_level"] == granted
    conn.nop()
    conn.pub("deflated", b"x")
    conn.expect_ok()


def test_wrongly_typed_json_is_e_bad_body(nsqd: Nsqd, connect: Connect) -> None:
    conn = connect(nsqd)
    conn.identify({"heartbeat_interval": "1000"})
    conn.expect_fatal("E_BAD_BODY")


def test_unknown_keys_are_ignored(nsqd: Nsqd, connect: Connect) -> None:
    answer = connect(nsqd).negotiate({"no_such_feature": [1, 2], "user_agent": "tests/1.0"})
    assert answer["version"] == __version__


def test_identify_body_over_max_body_size_is_e_bad_body(limited: Nsqd, connect: Connect) -> None:
    conn = connect(limited)
    conn.identify({"client_id": "x" * 5000})
    conn.expect_fatal("E_BAD_BODY")


def test_identify_again_before_sub_is_answered(nsqd: Nsqd, connect: Connect) -> None:
    # IDENTIFY does not move the connection out of its initial state; only SUB does
    conn = connect(nsqd)
    conn.identify({})
    conn.expect_ok()
    conn.identify({"client_id": "second"})
    conn.expect_ok()


def test_identify_after_sub_is_fatal_e_invalid(nsqd: Nsqd, connect: Connect, topic: str) -> None:
    conn = connect(nsqd)
    conn.sub(topic, "ch")
    conn.expect_ok()
    conn.identify({})
    conn.expect_fatal("E_INVALID")


def test_identity_shows_in_stats(nsqd: Nsqd, connect: Connect, topic: str) -> None:
    conn = connect(nsqd)
    conn.identify({"client_id": "worker-7", "hostname": "box.example", "user_agent": "tests/2.0"})
    conn.expect_ok()
    conn.sub(topic, "ch")
    conn.expect_ok()
    (client,) = nsqd.channel(topic, "ch")["clients"]  # type: ignore[index]
    assert client["client_id"] == "worker-7"
    assert client["hostname"] == "box.example"
    assert client["user_agent"] == "tests/2.0"
    assert client["version"] == "V2"
    assert client["deflate"] is False and client["snappy"] is False


@pytest.mark.parametrize("feature", ["deflate", "snappy"])
def test_compression_compresses_both_directions(nsqd: Nsqd, connect: Connect, topic: str,
                                                feature: str) -> None:
    body = b"a highly repetitive message body " * 3000  # ~100 KB
    conn = connect(nsqd)
    answer = conn.negotiate({feature: True})
    assert answer[feature] is True
    sent_before, received_before = conn.wire_bytes_sent, conn.wire_bytes_received
    plain_sent_before, plain_received_before = conn.plain_bytes_sent, conn.plain_bytes_received

    conn.pub(topic, body)
    conn.expect_ok()
    conn.sub(topic, "ch")
    conn.expect_ok()
    conn.rdy(1)
    msg = conn.read_message()
    assert msg.body == body and msg.attempts == 1
    conn.fin(msg.id)

    wire_sent = conn.wire_bytes_sent - sent_before
    wire_received = conn.wire_bytes_received - received_before
    assert conn.plain_bytes_sent - plain_sent_before > len(body)
    assert conn.plain_bytes_received - plain_received_before > len(body)
    assert wire_sent < len(body) // 10, f"client -> nsqd not compressed: {wire_sent} bytes"
    assert wire_received < len(body) // 10, f"nsqd -> client not compressed: {wire_received} bytes"

    # a plain consumer on another channel gets the body nsqd decompressed, byte for byte
    plain = connect(nsqd)
    plain.sub(topic, "plain")
    plain.expect_ok()
    conn.pub(topic, body[:1000])
    conn.expect_ok()
    plain.rdy(1)
    assert plain.read_message().body == body[:1000]
    (client,) = nsqd.channel(topic, "ch")["clients"]  # type: ignore[index]
    assert client[feature] is True


@pytest.mark.parametrize("feature", ["deflate", "snappy"])
def test_compressed_stream_survives_split_writes(nsqd: Nsqd, connect: Connect, topic: str,
                                                 feature: str) -> None:
    """Compressed commands written a few bytes at a time still decode on nsqd's side."""
    conn = connect(nsqd)
    conn.negotiate({feature: True})
    bodies = [f"message {i} ".encode() * 20 for i in range(20)]
    encoded = conn.encode(b"".join(cmd.pub(topic, b) for b in bodies))
    for i in range(0, len(encoded), 7):
        conn.send_raw(encoded[i:i + 7])
    for _ in bodies:
        conn.expect_ok()
    consumer = connect(nsqd)
    consumer.sub(topic, "ch")
    consumer.expect_ok()
    consumer.rdy(len(bodies))
    assert [m.body for m in consumer.read_messages(len(bodies))] == bodies


def test_compression_disabled_by_flags_is_refused_quietly(uncompressed: Nsqd, connect: Connect,
                                                          topic: str) -> None:
    conn = connect(uncompressed)
    answer = conn.negotiate({"deflate": True, "snappy": False})
    assert answer["deflate"] is False
    conn.pub(topic, b"plain")  # the stream stays uncompressed
    conn.expect_ok()
    conn2 = connect(uncompressed)
    answer = conn2.negotiate({"snappy": True})
    assert answer["snappy"] is False
    conn2.pub(topic, b"plain")
    conn2.expect_ok()


def test_without_feature_negotiation_compression_is_not_switched_on(nsqd: Nsqd, connect: Connect,
                                                                    topic: str) -> None:
    conn = connect(nsqd)
    conn.identify({"deflate": True})
    conn.expect_ok()
    conn.pub(topic, b"still plain")
    conn.expect_ok()
