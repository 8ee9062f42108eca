"""Consuming over raw V2: SUB, RDY, FIN, REQ, TOUCH, CLS and NOP, and the flags that bound
them (--max-rdy-count, --max-req-timeout, --max-msg-timeout, --max-channel-consumers),
on the ``limited`` server (msg timeout 1s, max 2s; RDY up to 5; REQ up to 1s)."""
from __future__ import annotations

import time
from typing import Any, Callable

from nsq_protocol import CLOSE_WAIT, decode_message
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
    conn.req(msg.id, 3_600_000)  # an hour, clamped to --max-req-timeout=1s
    stats = wait_for(lambda: limited.channel(topic, "ch"))
    assert stats["deferred_count"] == 1 and stats["requeue_count"] == 1
    again = conn.read_message(timeout=6)
    waited = time.monotonic() - requeued_at
    assert again.id == msg.id and again.attempts == 2
    assert 0.95 <= waited <= 4.5, waited


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


def test_touch_extends_a_message_up_to_max_msg_timeout_and_untouched_ones_time_out(
        limited: Nsqd, consumer: Consumer, publish: Publish, topic: str) -> None:
    """msg_timeout 1s, --max-msg-timeout 2s; three messages in flight at once:
    ``untouched`` times out and comes back (attempt 2) first; ``touched``, touched every
    0.3s, outlives its first second but times out at about two; ``kept`` is touched, also
    outlives its first second, and is FINed: it never times out."""
    publish(limited, topic, b"untouched", b"touched", b"kept")
    conn = consumer(limited, topic, "ch", rdy=3)
    ids = {m.body: m.id for m in conn.read_messages(3)}
    delivered = time.monotonic()
    redelivered: dict[bytes, float] = {}
    kept_finished = False
    while len(redelivered) < 2 and time.monotonic() - delivered < 6:
        if b"touched" not in redelivered:
            conn.touch(ids[b"touched"])
        if not kept_finished:
            if time.monotonic() - delivered < 1.4:
                conn.touch(ids[b"kept"])
            else:
                conn.fin(ids[b"kept"])
                kept_finished = True
        try:
            frame = conn.next_frame(0.3)
        except Silent:
            continue
        if frame.is_message:
            again = decode_message(frame.data)
            redelivered[again.body] = time.monotonic() - delivered
            assert again.id == ids[again.body] and again.attempts == 2
            conn.fin(again.id)
        else:  # touching ``touched`` just after it timed out
            assert frame.is_error and frame.error_code == "E_TOUCH_FAILED", frame
    assert set(redelivered) == {b"untouched", b"touched"}, redelivered
    assert redelivered[b"untouched"] < redelivered[b"touched"]
    assert 1.8 <= redelivered[b"touched"] <= 4.5, redelivered
    assert kept_finished
    conn.nop()
    stats = wait_for(lambda: (c := limited.channel(topic, "ch")) and c["in_flight_count"] == 0 and c)
    assert stats["timeout_count"] == 2 and stats["depth"] == 0


def test_max_channel_consumers(limited: Nsqd, consumer: Consumer, connect: Connect,
                               topic: str) -> None:
    consumer(limited, topic, "ch")
    consumer(limited, topic, "ch")
    third = connect(limited)
    third.sub(topic, "ch")
    frame = third.expect_fatal("E_SUB_FAILED")
    assert frame.data == f"E_SUB_FAILED SUB failed consumers for {topic}:ch exceeds limit of 2".encode()
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
