"""Drain (POST /drain, SIGTERM) with real nsqd processes: lookupd forgets the node,
publishes are refused (or kept with --drain-accept-publishes), consumers get nothing new
but may still FIN, are disconnected once they hold nothing, what is left in flight at
the timeout is requeued, and a restart on the same data directory delivers it."""
from __future__ import annotations

import re
import signal
import time
from typing import Callable

from tests.broker.wire import Closed, WireConn
from tests.conftest import Servers
from tests.servers import Nsqd, wait_for

Connect = Callable[..., WireConn]


def exit_code(server: Nsqd, timeout: float) -> int:
    """Wait for a draining nsqd to exit by itself; its exit code."""
    assert server.proc is not None
    code = server.proc.wait(timeout)
    server.proc = None
    return code


def frames_until_closed(conn: WireConn, timeout: float) -> list[bool]:
    """Whether each frame received before the server closed the connection was a message."""
    deadline = time.monotonic() + timeout
    kinds = []
    while True:
        try:
            frame = conn.next_frame(max(0.0, deadline - time.monotonic()))
        except Closed:
            return kinds
        kinds.append(frame.is_message)


def subscribe(connect: Connect, server: Nsqd, topic: str, channel: str, rdy: int) -> WireConn:
    conn = connect(server)
    conn.sub(topic, channel)
    conn.expect_ok()
    conn.rdy(rdy)
    return conn


def test_fined_during_drain_are_gone_and_unanswered_are_requeued_for_the_restart(
        servers: Servers, connect: Connect, topic: str) -> None:
    nsqd = servers.nsqd(drain_timeout="1s")
    bodies = [b"fin-me", b"leave-me-1", b"leave-me-2"]
    assert nsqd.post(f"/mpub?topic={topic}", b"\n".join(bodies)).status == 200
    sub = subscribe(connect, nsqd, topic, "work", rdy=3)
    held = {m.body: m for m in sub.read_messages(3)}
    assert nsqd.get("/ready").status == 200

    answer = nsqd.post("/drain")
    assert answer.status == 200 and answer.json()["draining"] is True
    assert nsqd.get("/ready").status == 503
    assert nsqd.get("/ping").status == 200  # liveness until exit
    sub.fin(held[b"fin-me"].id)
    state = wait_for(lambda: (s := nsqd.get_json("/drain"))["in_flight"] == 2 and s, 5,
                     message="the FIN during the drain is counted")
    assert state["started_at"] and state["messages_persisted"] is None
    assert nsqd.stats()["drain"]["draining"] is True

    assert exit_code(nsqd, 10) == 0
    assert "2 messages still in flight, requeueing them" in nsqd.log()
    nsqd.start()
    after = subscribe(connect, nsqd, topic, "work", rdy=10)
    redelivered = after.read_messages(2)
    assert sorted(m.body for m in redelivered) == [b"leave-me-1", b"leave-me-2"]
    assert all(m.attempts == 2 for m in redelivered)
    channel = nsqd.channel(topic, "work")
    assert channel is not None and channel["depth"] == 0 and channel["in_flight_count"] == 2


def test_publishes_are_refused_while_draining(servers: Servers, connect: Connect, topic: str) -> None:
    nsqd = servers.nsqd(drain_timeout="30s")
    nsqd.post(f"/pub?topic={topic}", b"held")
    sub = subscribe(connect, nsqd, topic, "c", rdy=1)
    msg = sub.read_message()
    nsqd.signal(signal.SIGTERM)
    wait_for(lambda: nsqd.get("/ready").status == 503, 5, message="the drain started")

    answer = nsqd.post(f"/pub?topic={topic}", b"late")
    assert (answer.status, answer.json()) == (503, {"message": "DRAINING"})
    assert nsqd.post(f"/mpub?topic={topic}", b"a\nb").status == 503
    for command, code in ((lambda c: c.pub(topic, b"x"), "E_PUB_FAILED"),
                          (lambda c: c.mpub(topic, [b"x"]), "E_MPUB_FAILED"),
                          (lambda c: c.dpub(topic, 10, b"x"), "E_DPUB_FAILED")):
        producer = connect(nsqd)
        command(producer)
        producer.expect_fatal(code)
    late = connect(nsqd)
    late.sub(topic, "other")
    late.expect_fatal("E_INVALID")

    sub.fin(msg.id)
    assert exit_code(nsqd, 10) == 0
    nsqd.start()
    t = nsqd.topic(topic)
    assert t is not None and t["message_count"] == 0 and t["depth"] == 0


def test_accept_publishes_flag_keeps_them_for_the_restart(servers: Servers, connect: Connect,
                                                           topic: str) -> None:
    nsqd = servers.nsqd(drain_timeout="30s", drain_accept_publishes="true")
    nsqd.post(f"/pub?topic={topic}", b"held")
    sub = subscribe(connect, nsqd, topic, "c", rdy=1)
    msg = sub.read_message()
    assert nsqd.post("/drain").status == 200

    producer = connect(nsqd)
    producer.pub(topic, b"over-tcp")
    producer.expect_ok()
    assert nsqd.post(f"/pub?topic={topic}", b"over-http").status == 200
    sub.rdy(5)
    sub.fin(msg.id)
    # nothing new reaches a draining consumer, which is disconnected once it holds nothing
    assert frames_until_closed(sub, 10) == []
    assert exit_code(nsqd, 10) == 0

    nsqd.start()
    after = subscribe(connect, nsqd, topic, "c", rdy=10)
    assert sorted(m.body for m in after.read_messages(2)) == [b"over-http", b"over-tcp"]


def test_a_consumers_own_cls_during_a_drain_is_confirmed_and_its_fin_still_counts(
        servers: Servers, connect: Connect, topic: str) -> None:
    # the drain put the consumer in CLOSING first; its own CLS must not cost it the FIN of
    # the message it holds
    nsqd = servers.nsqd(drain_timeout="30s")
    nsqd.post(f"/pub?topic={topic}", b"held")
    sub = subscribe(connect, nsqd, topic, "c", rdy=1)
    held = sub.read_message()
    assert nsqd.post("/drain").status == 200
    sub.cls()
    sub.expect_response(b"CLOSE_WAIT")
    sub.fin(held.id)
    sub.nop()
    wait_for(lambda: nsqd.get_json("/drain")["in_flight"] == 0, 5, message="the FIN during the drain")
    assert exit_code(nsqd, 10) == 0
    nsqd.start()
    assert nsqd.channel(topic, "c")["depth"] == 0  # type: ignore[index]


def test_consumer_without_cls_is_disconnected_once_its_in_flight_settles(
        servers: Servers, connect: Connect, topic: str) -> None:
    lookupd = servers.lookupd()
    nsqd = servers.nsqd(drain_timeout="30s", lookupd_tcp_address=lookupd.tcp_address)
    nsqd.post(f"/mpub?topic={topic}", b"one\ntwo\nthree")
    sub = subscribe(connect, nsqd, topic, "c", rdy=2)
    first, second = sub.read_messages(2)
    wait_for(lambda: lookupd.producer_tcp_ports(topic) == {nsqd.tcp_port}, 10,
             message="lookupd lists the node")

    started = time.monotonic()
    nsqd.signal(signal.SIGTERM)
    wait_for(lambda: lookupd.producers(topic) == [], 10, message="lookupd forgets the node")
    node = next(n for n in lookupd.get_json("/nodes")["producers"] if n["tcp_port"] == nsqd.tcp_port)
    assert node["topics"] == []
    sub.req(first.id, 0)
    wait_for(lambda: nsqd.get_json("/drain")["in_flight"] == 1, 5, message="the REQ during the drain")
    sub.fin(second.id)
    assert frames_until_closed(sub, 10) == []
    assert exit_code(nsqd, 10) == 0
    assert time.monotonic() - started < 15  # the 30s timeout was not waited for

    nsqd.start()
    after = subscribe(connect, nsqd, topic, "c", rdy=10)
    assert sorted(m.body for m in after.read_messages(2)) == [b"one", b"three"]
    wait_for(lambda: lookupd.producer_tcp_ports(topic) == {nsqd.tcp_port}, 10,
             message="the restarted node registers again")


def test_sigterm_with_nothing_in_flight_exits_promptly(servers: Servers, connect: Connect,
                                                       topic: str) -> None:
    nsqd = servers.nsqd()
    nsqd.post(f"/pub?topic={topic}", b"queued")
    idle = subscribe(connect, nsqd, topic, "c", rdy=0)
    started = time.monotonic()
    nsqd.signal(signal.SIGTERM)
    assert exit_code(nsqd, 10) == 0
    assert time.monotonic() - started < 3
    assert idle.closed_within(5)


def test_second_signal_cuts_the_wait_short_and_requeues(servers: Servers, connect: Connect,
                                                       topic: str) -> None:
    nsqd = servers.nsqd(drain_timeout="60s")
    nsqd.post(f"/pub?topic={topic}", b"never-answered")
    sub = subscribe(connect, nsqd, topic, "c", rdy=1)
    sub.read_message()
    started = time.monotonic()
    nsqd.signal(signal.SIGTERM)
    wait_for(lambda: nsqd.get_json("/drain")["in_flight"] == 1, 5, message="the drain waits for the message")
    nsqd.signal(signal.SIGINT)
    assert exit_code(nsqd, 10) == 0
    assert time.monotonic() - started < 15

    nsqd.start()
    after = subscribe(connect, nsqd, topic, "c", rdy=1)
    assert after.read_message().body == b"never-answered"


def progress_lines(server: Nsqd) -> list[tuple[int, float]]:
    """(messages in flight, seconds left) of each progress line the drain logged."""
    return [(int(n), float(s)) for n, s in re.findall(r"DRAIN: (\d+) messages in flight, ([\d.]+)s left",
                                                      server.log())]


def drain_reports(server: Nsqd, in_flight: int) -> bool:
    """GET /drain and /stats both say IN_FLIGHT are left, nothing persisted yet."""
    states = [server.get_json("/drain"), server.stats()["drain"]]
    return all(s["in_flight"] == in_flight and s["messages_persisted"] is None for s in states)


def test_drain_progress_counts_down_in_the_api_and_the_log(servers: Servers, connect: Connect,
                                                          topic: str) -> None:
    nsqd = servers.nsqd(drain_timeout="60s")
    assert nsqd.post(f"/mpub?topic={topic}", b"\n".join(b"m%d" % i for i in range(5))).status == 200
    sub = subscribe(connect, nsqd, topic, "work", rdy=3)
    held = sub.read_messages(3)  # the other 2 stay queued
    assert nsqd.post("/drain").status == 200

    for left, message in zip((3, 2, 1), held):
        wait_for(lambda left=left: drain_reports(nsqd, left), 5, message=f"/drain and /stats show {left} in flight")
        wait_for(lambda left=left: left in [n for n, _ in progress_lines(nsqd)], 5,
                 message=f"the log shows {left} in flight")
        sub.fin(message.id)
    assert exit_code(nsqd, 10) == 0

    lines = progress_lines(nsqd)
    assert [n for n, _ in lines] == sorted((n for n, _ in lines), reverse=True)
    assert {n for n, _ in lines} == {3, 2, 1}
    assert [s for _, s in lines] == sorted((s for _, s in lines), reverse=True)
    log = nsqd.log()
    assert "DRAIN: nothing in flight" in log
    assert re.search(r"DRAIN: done in [\d.]+s, 2 messages persisted", log)
    nsqd.start()
    channel = nsqd.channel(topic, "work")
    assert channel is not None and channel["depth"] == 2


def test_a_drain_that_keeps_the_api_up_reports_what_it_persisted(servers: Servers, connect: Connect,
                                                                 topic: str) -> None:
    """A scale-down drain: nsqd stays up after persisting, so GET /drain shows the count."""
    target = servers.nsqd()
    nsqd = servers.nsqd(drain_timeout="60s")
    assert nsqd.post(f"/mpub?topic={topic}", b"a\nb\nc\nd").status == 200
    sub = subscribe(connect, nsqd, topic, "work", rdy=1)
    held = sub.read_message()
    assert nsqd.post(f"/drain?handoff={target.http_address}").status == 200
    wait_for(lambda: drain_reports(nsqd, 1), 5, message="/drain and /stats show the message in flight")

    sub.fin(held.id)
    state = wait_for(lambda: (s := nsqd.get_json("/drain"))["finished_at"] and s, 10, message="the drain ends")
    assert state["in_flight"] == 0 and state["messages_persisted"] == 3
    assert nsqd.stats()["drain"]["messages_persisted"] == 3
    assert re.search(r"DRAIN: done in [\d.]+s, 3 messages persisted", nsqd.log())
    handoff = wait_for(lambda: (h := nsqd.get_json("/drain")["handoff"])["finished"] and h, 20,
                       message="the handoff ends")
    assert handoff["error"] is None and handoff["messages"] == 3
    nsqd.signal(signal.SIGTERM)
    assert exit_code(nsqd, 10) == 0
