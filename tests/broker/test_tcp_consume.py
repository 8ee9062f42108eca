"""Consuming over raw V2: SUB, RDY, FIN, REQ, TOUCH, CLS and NOP, and the flags that bound
them (--max-rdy-count, --max-req-timeout, --max-msg-timeout, --max-channel-consumers),
on the ``limited`` server (msg timeout 1s, max 2s; RDY up to 5; REQ up to 1.5s)."""
from __future__ import annotations

import time
from typing import Any, Callable

from nsq_protocol import CLOSE_WAIT
from tests.broker.conftest import Connect
from tests.broker.wire import Silent, WireConn
from tests.servers import Nsqd, wait_for

Consumer = Callable[..., WireConn]
Publish = Callable[..., None]


def test_rdy_without_a_count_means_one(nsqd: Nsqd, consumer: Consumer, publish: Publish,
                                       topic: str) -> None:
    conn = consumer(nsqd, topic, "ch")
    publish(nsqd, topic, b"a", b"b", b"c")
    conn.send(b"RDY\n")
    assert conn.read_message().body == b"a"
    conn.expect_silence(0.3)


def test_rdy_with_a_bad_count_is_fatal(nsqd: Nsqd, consumer: Consumer, topic: str) -> None:
    conn = consumer(nsqd, topic, "ch")
    conn.send(b"RDY many\n")
    conn.expect_fatal("E_INVALID")


def test_rdy_is_limited_by_max_rdy_count(limited: Nsqd, consumer: Consumer, publish: Publish,
                                         topic: str) -> None:
    publish(limited, topic, *[b"m%d" % i for i in range(8)])
    conn = consumer(limited, topic, "ch", rdy=5)
    first = conn.read_messages(5)
    conn.expect_silence(0.3)
    conn.fin(first[0].id)
    assert conn.read_message().body == b"m5"  # one FIN frees one slot
    conn.expect_silence(0.2)
    conn.rdy(6)
    conn.expect_fatal("E_INVALID")


def test_rdy_after_cls_is_ignored_and_fin_still_works(nsqd: Nsqd, consumer: Consumer,
                                                      publish: Publish, topic: str) -> None:
    publish(nsqd, topic, b"one", b"two")
    conn = consumer(nsqd, topic, "ch", rdy=1)
    msg = conn.read_message()
    conn.cls()
    conn.expect_response(CLOSE_WAIT)
    conn.rdy(10)
    conn.expect_silence(0.3)
    conn.fin(msg.id)
    conn.nop()
    wait_for(lambda: nsqd.channel(topic, "ch")["in_flight_count"] == 0)  # type: ignore[index]
    assert nsqd.channel(topic, "ch")["depth"] == 1  # type: ignore[index]


def test_commands_after_cls(nsqd: Nsqd, consumer: Consumer, topic: str) -> None:
    conn = consumer(nsqd, topic, "ch", rdy=1)
    conn.cls()
    conn.expect_response(CLOSE_WAIT)
    conn.sub(topic, "other")
    conn.expect_fatal("E_INVALID")


def test_fin_without_an_id_is_fatal(nsqd: Nsqd, consumer: Consumer, topic: str) -> None:
    conn = consumer(nsqd, topic, "ch", rdy=1)
    conn.send(b"FIN\n")
    conn.expect_fatal("E_INVALID")


def test_req_with_a_bad_delay_is_fatal(nsqd: Nsqd, consumer: Consumer, publish: Publish,
                                       topic: str) -> None:
    publish(nsqd, topic, b"x")
    conn = consumer(nsqd, topic, "ch", rdy=1)
    msg = conn.read_message()
    conn.send(b"REQ " + msg.id + b" soon\n")
    conn.expect_fatal("E_INVALID")


def test_req_delay_over_max_req_timeout_is_clamped(limited: Nsqd, consumer: Consumer,
                                                   publish: Publish, topic: str) -> None:
    publish(limited, topic, b"later")
    conn = consumer(limited, topic, "ch", rdy=1)
    msg = conn.read_message()
    requeued_at = time.monotonic()
    conn.req(msg.id, 3_600_000)  # an hour, clamped to --max-req-timeout=1.5s
    stats = wait_for(lambda: limited.channel(topic, "ch"))
    assert stats["deferred_count"] == 1 and stats["requeue_count"] == 1
    again = conn.read_message(timeout=6)
    waited = time.monotonic() - requeued_at
    assert again.id == msg.id and again.attempts == 2
    assert 1.3 <= waited <= 5, waited


def test_req_of_a_finished_message_fails_without_closing(nsqd: Nsqd, consumer: Consumer,
                                                         publish: Publish, topic: str) -> None:
    publish(nsqd, topic, b"x")
    conn = consumer(nsqd, topic, "ch", rdy=1)
    msg = conn.read_message()
    conn.fin(msg.id)
    conn.req(msg.id, 0)
    conn.expect_error("E_REQ_FAILED")
    conn.touch(msg.id)
    conn.expect_error("E_TOUCH_FAILED")
    conn.fin(msg.id)
    conn.expect_error("E_FIN_FAILED")
    conn.nop()
    conn.pub(topic, b"still open")
    conn.expect_ok()


def test_touch_cannot_extend_past_max_msg_timeout(limited: Nsqd, consumer: Consumer,
                                                  publish: Publish, topic: str) -> None:
    """With msg_timeout 1s and --max-msg-timeout 2s, touching every 0.3s keeps a message
    past its first second but not past the second."""
    publish(limited, topic, b"touchy")
    conn = consumer(limited, topic, "ch", rdy=1)
    msg = conn.read_message()
    delivered = time.monotonic()
    redelivered = None
    while redelivered is None and time.monotonic() - delivered < 6:
        conn.touch(msg.id)
        try:
            frame = conn.next_frame(0.3)
        except Silent:
            continue
        if frame.is_message:
            redelivered = time.monotonic() - delivered
        else:  # touching a message that just timed out
            assert frame.is_error and frame.error_code == "E_TOUCH_FAILED", frame
    assert redelivered is not None, "the touched message never timed out"
    assert 1.8 <= redelivered <= 4.5, redelivered


def test_touch_keeps_a_message_past_its_timeout(limited: Nsqd, consumer: Consumer,
                                                publish: Publish, topic: str) -> None:
    publish(limited, topic, b"kept")
    conn = consumer(limited, topic, "ch", rdy=1)
    msg = conn.read_message()
    deadline = time.monotonic() + 1.6
    while time.monotonic() < deadline:
        conn.touch(msg.id)
        conn.expect_silence(0.3)
    conn.fin(msg.id)
    conn.nop()
    wait_for(lambda: limited.channel(topic, "ch")["in_flight_count"] == 0)  # type: ignore[index]
    assert limited.channel(topic, "ch")["timeout_count"] == 0  # type: ignore[index]


def test_timed_out_message_is_counted(limited: Nsqd, consumer: Consumer, publish: Publish,
                                      topic: str) -> None:
    publish(limited, topic, b"slow")
    conn = consumer(limited, topic, "ch", rdy=1)
    first = conn.read_message()
    second = conn.read_message(timeout=5)
    assert second.id == first.id and second.attempts == first.attempts + 1
    stats = limited.channel(topic, "ch")
    assert stats is not None and stats["timeout_count"] == 1


def test_max_channel_consumers(limited: Nsqd, consumer: Consumer, connect: Connect,
                               topic: str) -> None:
    consumer(limited, topic, "ch")
    consumer(limited, topic, "ch")
    third = connect(limited)
    third.sub(topic, "ch")
    third.expect_fatal("E_TOO_MANY_CHANNEL_CONSUMERS")
    consumer(limited, topic, "another")  # the limit is per channel


def test_nop_between_pipelined_commands(nsqd: Nsqd, connect: Connect, topic: str) -> None:
    conn = connect(nsqd)
    conn.send(b"NOP\n" + b"PUB " + topic.encode() + b"\n\x00\x00\x00\x01a" + b"NOP\nNOP\n"
              + b"PUB " + topic.encode() + b"\n\x00\x00\x00\x01b")
    conn.expect_ok()
    conn.expect_ok()
    conn.expect_silence(0.2)


def test_messages_carry_hex_ids_and_a_current_timestamp(nsqd: Nsqd, consumer: Consumer,
                                                        publish: Publish, topic: str) -> None:
    before = time.time_ns()
    publish(nsqd, topic, b"stamped")
    conn = consumer(nsqd, topic, "ch", rdy=1)
    msg = conn.read_message()
    after = time.time_ns()
    assert len(msg.id) == 16 and all(c in b"0123456789abcdef" for c in msg.id)
    assert before - 10**9 <= msg.timestamp <= after


def test_requeued_messages_go_round_robin_over_consumers(nsqd: Nsqd, consumer: Consumer,
                                                         publish: Publish, topic: str) -> None:
    a = consumer(nsqd, topic, "ch", rdy=1)
    b = consumer(nsqd, topic, "ch", rdy=1)
    publish(nsqd, topic, b"1", b"2")
    got_a, got_b = a.read_message(), b.read_message()
    assert {got_a.body, got_b.body} == {b"1", b"2"}
    a.req(got_a.id, 0)
    b.fin(got_b.id)
    again = wait_for(lambda: _first_message(a, b))
    assert again.id == got_a.id and again.attempts == 2


def _first_message(*conns: WireConn) -> Any:
    for conn in conns:
        try:
            return conn.read_message(0.05)
        except Silent:
            continue
    return None
