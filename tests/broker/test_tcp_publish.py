"""Publishing over raw V2: PUB, MPUB and DPUB against --max-msg-size, --max-body-size and
--max-req-timeout (the ``limited`` server: 1 KiB messages, 4 KiB bodies, 1.5 s defers)."""
from __future__ import annotations

import struct
import time
from typing import Callable

import pytest

from tests.broker.conftest import Connect
from tests.broker.wire import WireConn
from tests.servers import Nsqd, wait_for

Consumer = Callable[..., WireConn]


def test_pub_at_max_msg_size_is_accepted_and_one_byte_more_is_fatal(limited: Nsqd, connect: Connect,
                                                                    consumer: Consumer, topic: str) -> None:
    body = bytes(range(256)) * 4  # 1024 bytes, every byte value
    conn = connect(limited)
    conn.pub(topic, body)
    conn.expect_ok()
    sub = consumer(limited, topic, "ch", rdy=1)
    assert sub.read_message().body == body
    conn.pub(topic, body + b"!")
    conn.expect_fatal("E_BAD_MESSAGE")


def test_mpub_at_max_body_size_is_accepted(limited: Nsqd, connect: Connect, consumer: Consumer,
                                           topic: str) -> None:
    bodies = [bytes([65 + i]) * 1019 for i in range(4)]  # 4 + 4 * (4 + 1019) = 4096 bytes
    conn = connect(limited)
    conn.mpub(topic, bodies)
    conn.expect_ok()
    sub = consumer(limited, topic, "ch", rdy=4)
    assert [m.body for m in sub.read_messages(4)] == bodies


def test_mpub_over_max_body_size_is_fatal_before_the_body_is_read(limited: Nsqd, connect: Connect,
                                                                  topic: str) -> None:
    conn = connect(limited)
    conn.send(b"MPUB " + topic.encode() + b"\n" + struct.pack(">I", 4097))  # no body follows
    conn.expect_fatal("E_BAD_BODY")


def test_mpub_message_over_max_msg_size_is_fatal(limited: Nsqd, connect: Connect, topic: str) -> None:
    conn = connect(limited)
    conn.mpub(topic, [b"ok", b"x" * 1025])
    conn.expect_fatal("E_BAD_MESSAGE")
    assert limited.topic(topic) is None or limited.topic(topic)["message_count"] == 0  # type: ignore[index]


def test_mpub_count_beyond_what_the_body_holds_is_e_bad_message(nsqd: Nsqd, connect: Connect,
                                                                topic: str) -> None:
    body = struct.pack(">I", 3) + struct.pack(">I", 1) + b"a" + struct.pack(">I", 1) + b"b"
    conn = connect(nsqd)
    conn.send(b"MPUB " + topic.encode() + b"\n" + struct.pack(">I", len(body)) + body)
    conn.expect_fatal("E_BAD_MESSAGE")


def test_mpub_count_that_cannot_fit_max_body_size_is_e_bad_body(limited: Nsqd, connect: Connect,
                                                                topic: str) -> None:
    body = struct.pack(">I", 1000) + (struct.pack(">I", 1) + b"a") * 2
    conn = connect(limited)
    conn.send(b"MPUB " + topic.encode() + b"\n" + struct.pack(">I", len(body)) + body)
    conn.expect_fatal("E_BAD_BODY")


@pytest.mark.parametrize("size", [0, -1])
def test_mpub_message_with_a_bad_size_is_e_bad_message(nsqd: Nsqd, connect: Connect, topic: str,
                                                       size: int) -> None:
    body = struct.pack(">I", 1) + struct.pack(">i", size)
    conn = connect(nsqd)
    conn.send(b"MPUB " + topic.encode() + b"\n" + struct.pack(">I", len(body)) + body)
    conn.expect_fatal("E_BAD_MESSAGE")


def test_oversized_pub_is_refused_without_waiting_for_its_body(nsqd: Nsqd, connect: Connect,
                                                               topic: str) -> None:
    conn = connect(nsqd)
    conn.send(b"PUB " + topic.encode() + b"\n" + struct.pack(">I", 100 * 1024 * 1024) + b"partial")
    conn.expect_fatal("E_BAD_MESSAGE", timeout=2)


def test_topic_names_longer_than_64_are_e_bad_topic(nsqd: Nsqd, connect: Connect) -> None:
    conn = connect(nsqd)
    conn.pub("a" * 64, b"fine")
    conn.expect_ok()
    conn.pub("a" * 65, b"too long")
    conn.expect_fatal("E_BAD_TOPIC")


def test_dpub_at_max_req_timeout_is_deferred_that_long(limited: Nsqd, connect: Connect,
                                                       consumer: Consumer, topic: str) -> None:
    sub = consumer(limited, topic, "ch", rdy=1)
    conn = connect(limited)
    published = time.monotonic()
    conn.dpub(topic, 1000, b"later")
    conn.expect_ok()
    stats = wait_for(lambda: limited.channel(topic, "ch"))
    assert stats["deferred_count"] == 1 and stats["depth"] == 0
    msg = sub.read_message(timeout=6)
    waited = time.monotonic() - published
    assert msg.body == b"later" and msg.attempts == 1
    assert 0.95 <= waited <= 5, waited


def test_dpub_over_max_req_timeout_is_fatal(limited: Nsqd, connect: Connect, topic: str) -> None:
    conn = connect(limited)
    conn.dpub(topic, 1001, b"too late")
    conn.expect_fatal("E_INVALID")


def test_dpub_of_zero_is_delivered_at_once(nsqd: Nsqd, connect: Connect, consumer: Consumer,
                                           topic: str) -> None:
    sub = consumer(nsqd, topic, "ch", rdy=1)
    conn = connect(nsqd)
    conn.dpub(topic, 0, b"now")
    conn.expect_ok()
    assert sub.read_message(timeout=2).body == b"now"


def test_dpub_reaches_every_channel_after_the_delay(nsqd: Nsqd, connect: Connect, consumer: Consumer,
                                                    topic: str) -> None:
    subs = [consumer(nsqd, topic, name, rdy=1) for name in ("a", "b")]
    conn = connect(nsqd)
    conn.dpub(topic, 300, b"for both")
    conn.expect_ok()
    subs[0].expect_silence(0.2)
    for sub in subs:
        assert sub.read_message(timeout=5).body == b"for both"


def test_publish_counters_in_stats(nsqd: Nsqd, connect: Connect, topic: str) -> None:
    conn = connect(nsqd)
    conn.pub(topic, b"12345")
    conn.expect_ok()
    conn.mpub(topic, [b"ab", b"cde"])
    conn.expect_ok()
    conn.dpub(topic, 60000, b"z")
    conn.expect_ok()
    stats = nsqd.topic(topic)
    assert stats is not None
    assert stats["message_count"] == 4
    assert stats["message_bytes"] == 11
    assert stats["depth"] == 4  # no channel yet: the topic holds them (deferral happens per channel)
