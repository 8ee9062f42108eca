"""Publishing over HTTP: /pub (with defer) and /mpub (newline and binary), status codes
and ``{"message": CODE}`` errors, against the flag limits of the ``limited`` server."""
from __future__ import annotations

import json
import time
from typing import Callable

import pytest

from nsq_protocol.commands import encode_mpub_body
from tests.broker.wire import WireConn
from tests.servers import Nsqd, http, wait_for

Consumer = Callable[..., WireConn]


def _error(status_body: tuple[int, bytes]) -> tuple[int, str]:
    status, body = status_body
    return status, json.loads(body)["message"]


def test_pub_answers_ok_and_delivers_the_body_byte_for_byte(nsqd: Nsqd, consumer: Consumer,
                                                           topic: str) -> None:
    sub = consumer(nsqd, topic, "ch", rdy=1)
    body = bytes(range(256)) + b"\n\r\n\x00 trailing"
    assert http("POST", nsqd.url(f"/pub?topic={topic}"), body) == (200, b"OK")
    msg = sub.read_message()
    assert msg.body == body and msg.attempts == 1


def test_pub_at_max_msg_size_is_accepted_and_one_byte_more_is_413(limited: Nsqd, topic: str) -> None:
    assert http("POST", limited.url(f"/pub?topic={topic}"), b"x" * 1024) == (200, b"OK")
    assert _error(http("POST", limited.url(f"/pub?topic={topic}"), b"x" * 1025)) == (413, "MSG_TOO_BIG")
    assert limited.topic(topic)["message_count"] == 1  # type: ignore[index]


@pytest.mark.parametrize("path,body,expected", [
    ("/pub", b"x", (400, "MISSING_ARG_TOPIC")),
    ("/pub?topic=bad!name", b"x", (400, "INVALID_TOPIC")),
    ("/pub?topic=ok", b"", (400, "MSG_EMPTY")),
    ("/pub?topic=ok&defer=-1", b"x", (400, "INVALID_DEFER")),
    ("/pub?topic=ok&defer=soon", b"x", (400, "INVALID_DEFER")),
    ("/mpub", b"x", (400, "MISSING_ARG_TOPIC")),
    ("/mpub?topic=" + "a" * 65, b"x", (400, "INVALID_TOPIC")),
])
def test_publish_argument_errors(nsqd: Nsqd, path: str, body: bytes, expected: tuple[int, str]) -> None:
    assert _error(http("POST", nsqd.url(path), body)) == expected


def test_pub_defer_up_to_max_req_timeout(limited: Nsqd, consumer: Consumer, topic: str) -> None:
    assert _error(http("POST", limited.url(f"/pub?topic={topic}&defer=1001"), b"x")) == (400, "INVALID_DEFER")
    sub = consumer(limited, topic, "ch", rdy=1)
    published = time.monotonic()
    assert http("POST", limited.url(f"/pub?topic={topic}&defer=1000"), b"deferred") == (200, b"OK")
    stats = wait_for(lambda: limited.channel(topic, "ch"))
    assert stats["deferred_count"] == 1
    msg = sub.read_message(timeout=6)
    assert msg.body == b"deferred"
    assert 0.95 <= time.monotonic() - published <= 5


def test_mpub_newline_separated(nsqd: Nsqd, consumer: Consumer, topic: str) -> None:
    sub = consumer(nsqd, topic, "ch", rdy=10)
    body = b"first\nsecond line\n\n\nthird\n"
    assert http("POST", nsqd.url(f"/mpub?topic={topic}"), body) == (200, b"OK")
    assert [m.body for m in sub.read_messages(3)] == [b"first", b"second line", b"third"]
    sub.expect_silence(0.2)


@pytest.mark.parametrize("flag", ["true", "1"])
def test_mpub_binary_keeps_newlines_inside_messages(nsqd: Nsqd, consumer: Consumer, topic: str,
                                                    flag: str) -> None:
    bodies = [b"one\ntwo", b"\n", b"\x00\xff" * 100]
    sub = consumer(nsqd, topic, "ch", rdy=10)
    assert http("POST", nsqd.url(f"/mpub?topic={topic}&binary={flag}"), encode_mpub_body(bodies)) == (200, b"OK")
    assert [m.body for m in sub.read_messages(3)] == bodies


def test_mpub_limits(limited: Nsqd, topic: str) -> None:
    url = limited.url(f"/mpub?topic={topic}")
    assert _error(http("POST", url, b"y" * 1025 + b"\nok")) == (413, "MSG_TOO_BIG")
    assert _error(http("POST", url, (b"z" * 100 + b"\n") * 41)) == (413, "BODY_TOO_BIG")  # 4141 > 4096
    binary = limited.url(f"/mpub?topic={topic}&binary=true")
    assert _error(http("POST", binary, encode_mpub_body([b"ok", b"w" * 1025]))) == (413, "BAD_MESSAGE")
    assert _error(http("POST", binary, b"\x00\x00\x00\x02\x00\x00\x00\x01a")) == (413, "BAD_MESSAGE")
    assert _error(http("POST", binary, b"\x00\x00\x00\x00")) == (413, "BAD_BODY")
    topic_stats = limited.topic(topic)
    assert topic_stats is None or topic_stats["message_count"] == 0


def test_wrong_methods_are_405_json(nsqd: Nsqd) -> None:
    assert _error(http("GET", nsqd.url("/pub?topic=x"))) == (405, "METHOD_NOT_ALLOWED")
    assert _error(http("PUT", nsqd.url("/mpub?topic=x"), b"x")) == (405, "METHOD_NOT_ALLOWED")
    assert _error(http("POST", nsqd.url("/stats"))) == (405, "METHOD_NOT_ALLOWED")


def test_http_publishing_counts_in_topic_stats(nsqd: Nsqd, topic: str) -> None:
    http("POST", nsqd.url(f"/pub?topic={topic}"), b"1234")
    http("POST", nsqd.url(f"/mpub?topic={topic}"), b"ab\ncd")
    stats = nsqd.topic(topic)
    assert stats is not None
    assert stats["message_count"] == 3 and stats["message_bytes"] == 8 and stats["depth"] == 3


def test_http_publishes_are_delivered_in_order_whether_queued_on_the_topic_or_not(
        nsqd: Nsqd, consumer: Consumer, topic: str) -> None:
    # before any channel the topic holds what is published (an MPUB large enough to be kept
    # as one run, a PUB, a text MPUB); the first channel takes it when it appears, then new
    # publishes go straight to it
    early = [f"early {i}".encode() for i in range(300)] + [b"single"] + [b"text a", b"text b"]
    assert http("POST", nsqd.url(f"/mpub?topic={topic}&binary=true"), encode_mpub_body(early[:300])) == (200, b"OK")
    assert http("POST", nsqd.url(f"/pub?topic={topic}"), b"single") == (200, b"OK")
    assert http("POST", nsqd.url(f"/mpub?topic={topic}"), b"text a\ntext b\n") == (200, b"OK")
    assert nsqd.topic(topic)["depth"] == len(early)  # type: ignore[index]
    late = [f"late {i}".encode() for i in range(300)]
    sub = consumer(nsqd, topic, "ch", rdy=1000)
    assert http("POST", nsqd.url(f"/mpub?topic={topic}&binary=true"), encode_mpub_body(late)) == (200, b"OK")
    got = sub.read_messages(len(early) + len(late))
    assert [m.body for m in got] == early + late
    assert len({m.id for m in got}) == len(got) and all(m.attempts == 1 for m in got)
    sub.expect_silence(0.2)
