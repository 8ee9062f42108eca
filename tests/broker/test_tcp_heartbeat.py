"""Heartbeats: sent at the negotiated interval, and a client that sends nothing for two
intervals is dropped at that moment; any command (not only NOP) counts as a sign of life.

Each scenario takes seconds of wall time (1s is the shortest interval IDENTIFY accepts)
and they share nothing but the server, so one test runs them side by side."""
from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

from nsq_protocol import HEARTBEAT
from tests.broker.conftest import Connect
from tests.broker.wire import Closed, Silent, WireConn
from tests.servers import Nsqd


def heartbeats_until_dropped(conn: WireConn, since: float) -> tuple[list[float], float]:
    """Reads heartbeats (only) until nsqd closes the connection, at most 8s after ``since``:
    when each came and when the connection closed, in seconds after ``since``."""
    beats: list[float] = []
    while time.monotonic() - since < 8:
        try:
            frame = conn.read_frame(timeout=1)
        except Silent:
            continue
        except Closed:
            return beats, time.monotonic() - since
        assert frame.is_response and frame.data == HEARTBEAT, frame
        beats.append(time.monotonic() - since)
    raise AssertionError(f"nsqd kept a silent client (heartbeats at {beats})")


def silent_client_gets_heartbeats_then_is_dropped_after_two_intervals(nsqd: Nsqd, connect: Connect,
                                                                     topic: str) -> None:
    conn = connect(nsqd, auto_nop=False)
    conn.negotiate({"heartbeat_interval": 1000})
    last_command = time.monotonic()
    beats, closed_after = heartbeats_until_dropped(conn, last_command)
    # nsqd's read deadline is two intervals after the last command: the heartbeat due at
    # that same moment may or may not make it out first (the clock started once the
    # answer to IDENTIFY was in, a little after nsqd read it)
    assert len(beats) >= 1, beats
    assert 0.8 <= beats[0] <= 1.6, beats
    assert 1.9 <= closed_after <= 2.6, closed_after


def client_silent_between_heartbeats_is_dropped_two_intervals_after_its_last_command(
        nsqd: Nsqd, connect: Connect, topic: str) -> None:
    """The last command comes a fifth of an interval after a heartbeat, so the read
    deadline falls between two heartbeats: the drop is at the deadline (2s after the
    command), not at the first heartbeat after it (2.8s)."""
    conn = connect(nsqd, auto_nop=False)
    conn.negotiate({"heartbeat_interval": 1000})
    frame = conn.read_frame(timeout=2)
    assert frame.is_response and frame.data == HEARTBEAT, frame
    conn.expect_silence(0.2)
    last_command = time.monotonic()  # before nsqd can read it: the bounds below are safe
    conn.nop()
    _, closed_after = heartbeats_until_dropped(conn, last_command)
    assert 2.0 <= closed_after <= 2.6, closed_after  # never before two intervals


def any_command_keeps_a_client_alive(nsqd: Nsqd, connect: Connect, topic: str) -> None:
    """A publisher that never answers heartbeats with NOP, but publishes twice a second."""
    conn = connect(nsqd, auto_nop=False)
    conn.negotiate({"heartbeat_interval": 1000})
    end = time.monotonic() + 2.6  # past two intervals of no NOP
    beats = 0
    while time.monotonic() < end:
        conn.pub(topic, b"alive")
        while True:
            frame = conn.read_frame(timeout=2)
            if frame.is_response and frame.data == HEARTBEAT:
                beats += 1
                continue
            assert frame.is_response and frame.data == b"OK", frame
            break
        try:
            frame = conn.read_frame(timeout=0.5)
            assert frame.is_response and frame.data == HEARTBEAT, frame
            beats += 1
        except Silent:
            pass
    assert beats >= 2  # heartbeats kept coming and were never answered
    conn.pub(topic, b"still here")
    while (frame := conn.read_frame()).data == HEARTBEAT:
        pass
    assert frame.is_response and frame.data == b"OK"


def heartbeats_go_to_a_consumer_between_messages(nsqd: Nsqd, connect: Connect, topic: str) -> None:
    conn = connect(nsqd)
    conn.negotiate({"heartbeat_interval": 1000})
    conn.sub(topic, "ch")
    conn.expect_ok()
    conn.rdy(1)
    conn.expect_silence(1.4)  # next_frame answers each heartbeat with NOP
    assert conn.heartbeats >= 1
    publisher = connect(nsqd)
    publisher.pub(topic, b"after the beats")
    publisher.expect_ok()
    assert conn.read_message().body == b"after the beats"


SCENARIOS = [silent_client_gets_heartbeats_then_is_dropped_after_two_intervals,
             client_silent_between_heartbeats_is_dropped_two_intervals_after_its_last_command,
             any_command_keeps_a_client_alive, heartbeats_go_to_a_consumer_between_messages]


def test_heartbeat_scenarios_side_by_side(nsqd: Nsqd, connect: Connect, topic: str) -> None:
    with ThreadPoolExecutor(len(SCENARIOS)) as pool:
        running = [pool.submit(scenario, nsqd, connect, f"{topic}-{i}") for i, scenario in enumerate(SCENARIOS)]
        for scenario in running:
            scenario.result()  # re-raises the scenario's own assertion
