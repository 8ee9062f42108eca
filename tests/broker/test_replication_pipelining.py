"""A connection's publishes to a replicated topic are pipelined: while one waits for a
backup's ACK, the publishes behind it are taken (and copied with it), and every answer
leaves in the order of the commands. Both backups are stopped with SIGSTOP, so the first
publish waits for as long as the test says; SIGCONT lets the ACKs come."""
from __future__ import annotations

import signal
from typing import Callable

import pytest

from tests.broker.conftest import Connect
from tests.broker.replicas import Cluster, cluster  # noqa: F401  (the fixture)
from tests.broker.wire import WireConn
from tests.servers import Nsqd, wait_for

OWED_ANSWERS_LIMIT = 64  # nsqd.protocol_v2's: publishes owed before a connection stops reading


def message_count(node: Nsqd, topic: str) -> int:
    stats = node.topic(topic)
    return int(stats["message_count"]) if stats else 0


@pytest.fixture
def stalled(cluster: Callable[..., Cluster]) -> Callable[..., tuple[Nsqd, list[Nsqd]]]:
    """A cluster of 3 (``plain`` has one copy) whose backups can be stopped."""
    def make(**flags: object) -> tuple[Nsqd, list[Nsqd]]:
        c = cluster(3, topic_replicas_for="plain:1", **flags)
        owner, *backups = c.nodes
        return owner, backups
    return make


class Stopped:
    def __init__(self, nodes: list[Nsqd]) -> None:
        self.nodes = nodes

    def __enter__(self) -> "Stopped":
        for node in self.nodes:
            node.signal(signal.SIGSTOP)
        return self

    def __exit__(self, *exc: object) -> None:
        for node in self.nodes:
            node.signal(signal.SIGCONT)


def warmed(connect: Connect, owner: Nsqd) -> WireConn:
    conn = connect(owner)
    for topic in ("orders", "plain"):
        conn.pub(topic, b"warm")
        conn.expect_ok()
    return conn


def test_publishes_behind_one_waiting_for_its_replicas_are_taken_and_answered_in_order(
        stalled: Callable[..., tuple[Nsqd, list[Nsqd]]], connect: Connect) -> None:
    owner, backups = stalled(replication_timeout="20s")
    conn = warmed(connect, owner)
    with Stopped(backups):
        conn.pub("orders", b"r1")  # waits for a backup
        conn.pub("plain", b"u1")  # unreplicated: its OK is ready at once, and waits behind r1's
        conn.mpub("orders", [b"r2", b"r3"])
        conn.dpub("plain", 60_000, b"u2")
        conn.nop()
        conn.identify({"feature_negotiation": True})  # not a publish: it waits for every answer before it
        conn.pub("orders", b"r4")  # behind IDENTIFY
        wait_for(lambda: (message_count(owner, "orders"), message_count(owner, "plain")) == (4, 3), 10,
                 message=f"every publish before IDENTIFY taken while r1 waits ({message_count(owner, 'orders')}, "
                         f"{message_count(owner, 'plain')})")
        conn.expect_silence(0.3)  # no answer passes r1's
        assert message_count(owner, "orders") == 4  # r4 not taken before IDENTIFY ran
    for _ in range(4):  # r1, u1, the MPUB, the DPUB
        conn.expect_ok(timeout=20)
    assert conn.read_json(timeout=10)["max_rdy_count"] > 0  # IDENTIFY's answer, in its place
    conn.expect_ok(timeout=10)  # r4
    assert message_count(owner, "orders") == 5


def test_a_publish_that_no_quorum_answers_fails_before_the_answers_behind_it(
        stalled: Callable[..., tuple[Nsqd, list[Nsqd]]], connect: Connect) -> None:
    owner, backups = stalled(replication_timeout="1s")
    conn = warmed(connect, owner)
    with Stopped(backups):
        conn.pub("orders", b"never held by a backup")
        conn.pub("plain", b"taken, but its OK is never sent")
        conn.expect_fatal("E_PUB_FAILED", timeout=10)  # the first frame: no OK passed it
    assert message_count(owner, "plain") == 2


def test_a_connection_owing_too_many_answers_stops_reading_until_they_are_written(
        stalled: Callable[..., tuple[Nsqd, list[Nsqd]]], connect: Connect) -> None:
    owner, backups = stalled(replication_timeout="20s")
    conn = warmed(connect, owner)
    topics = ("orders", "returns")  # alternating, so no two PUBs make one batch
    conn.pub("returns", b"warm")
    conn.expect_ok()
    sent = OWED_ANSWERS_LIMIT + 10

    def taken() -> int:
        return sum(message_count(owner, t) for t in topics) - 2  # the warm-up PUBs

    with Stopped(backups):
        for i in range(sent):
            conn.pub(topics[i % 2], b"%d" % i)
        wait_for(lambda: taken() == OWED_ANSWERS_LIMIT, 10,
                 message=f"as many publishes taken as answers may be owed ({taken()})")
        conn.expect_silence(0.3)
        assert taken() == OWED_ANSWERS_LIMIT
    for _ in range(sent):
        conn.expect_ok(timeout=20)
    assert taken() == sent
