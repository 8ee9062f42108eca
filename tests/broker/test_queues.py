"""--mem-queue-size, the disk behind it, ephemeral topics and channels (which keep nothing
beyond memory and are forgotten on restart), and what a restart keeps."""
from __future__ import annotations

from typing import Callable

import pytest

from tests.broker.conftest import Connect
from tests.broker.wire import WireConn
from tests.conftest import Servers
from tests.servers import Nsqd, http, wait_for

Consumer = Callable[..., WireConn]


@pytest.fixture(scope="module")
def small(module_servers: Servers) -> Nsqd:
    return module_servers.nsqd(mem_queue_size=2)


def _post(server: Nsqd, path: str) -> None:
    status, body = http("POST", server.url(path))
    assert status == 200, (path, status, body)


def _create(server: Nsqd, topic: str, *channels: str) -> None:
    _post(server, f"/topic/create?topic={topic}")
    for channel in channels:
        _post(server, f"/channel/create?topic={topic}&channel={channel.replace('#', '%23')}")


def _bodies(n: int) -> list[bytes]:
    return [b"msg-%02d" % i for i in range(n)]


def test_channel_overflow_goes_to_disk_and_is_all_delivered(small: Nsqd, connect: Connect,
                                                            consumer: Consumer, topic: str) -> None:
    _create(small, topic, "ch")
    conn = connect(small)
    conn.mpub(topic, _bodies(10))
    conn.expect_ok()
    stats = wait_for(lambda: (c := small.channel(topic, "ch")) and c["depth"] == 10 and c)
    assert stats["backend_depth"] == 8
    sub = consumer(small, topic, "ch", rdy=10)
    got = sub.read_messages(10)
    assert sorted(m.body for m in got) == _bodies(10) and {m.attempts for m in got} == {1}
    for m in got:
        sub.fin(m.id)
    wait_for(lambda: small.channel(topic, "ch")["depth"] == 0)  # type: ignore[index]


def test_topic_without_channels_overflows_to_disk_then_feeds_its_first_channel(
        small: Nsqd, connect: Connect, consumer: Consumer, topic: str) -> None:
    conn = connect(small)
    conn.mpub(topic, _bodies(7))
    conn.expect_ok()
    stats = small.topic(topic)
    assert stats is not None and stats["depth"] == 7 and stats["backend_depth"] == 5
    sub = consumer(small, topic, "ch", rdy=7)
    # memory and disk are drained side by side, so only the set is certain
    assert sorted(m.body for m in sub.read_messages(7)) == _bodies(7)
    wait_for(lambda: small.topic(topic)["depth"] == 0)  # type: ignore[index]


def test_ephemeral_channel_drops_what_does_not_fit_in_memory(small: Nsqd, connect: Connect,
                                                             consumer: Consumer, topic: str) -> None:
    sub = consumer(small, topic, "ch#ephemeral", rdy=0)
    conn = connect(small)
    conn.mpub(topic, _bodies(6))
    conn.expect_ok()
    stats = wait_for(lambda: (c := small.channel(topic, "ch#ephemeral")) and c["message_count"] == 6 and c)
    assert stats["depth"] == 2 and stats["backend_depth"] == 0
    sub.rdy(10)
    assert [m.body for m in sub.read_messages(2)] == _bodies(2)
    sub.expect_silence(0.3)


def test_ephemeral_topic_drops_what_does_not_fit_in_memory(small: Nsqd, connect: Connect,
                                                           consumer: Consumer, topic: str) -> None:
    name = topic + "#ephemeral"
    conn = connect(small)
    conn.mpub(name, _bodies(5))
    conn.expect_ok()
    stats = small.topic(name)
    assert stats is not None and stats["depth"] == 2 and stats["backend_depth"] == 0
    sub = consumer(small, name, "ch", rdy=5)
    assert [m.body for m in sub.read_messages(2)] == _bodies(2)
    sub.expect_silence(0.3)


def test_a_restart_keeps_messages_channels_and_pauses_but_nothing_ephemeral(
        servers: Servers, connect: Connect, consumer: Consumer, topic: str) -> None:
    nsqd = servers.nsqd(mem_queue_size=2)
    ephemeral_topic = topic + "-gone#ephemeral"
    _create(nsqd, ephemeral_topic.replace("#", "%23"))
    _create(nsqd, topic, "durable", "gone#ephemeral")
    _post(nsqd, f"/channel/pause?topic={topic}&channel=durable")
    conn = connect(nsqd)
    conn.mpub(topic, _bodies(5))
    conn.expect_ok()
    sub = consumer(nsqd, topic, "durable", rdy=0)  # connected while nsqd stops
    wait_for(lambda: nsqd.channel(topic, "durable")["depth"] == 5)  # type: ignore[index]

    assert nsqd.stop() == 0
    assert sub.closed_within(5)
    nsqd.start()

    stats = nsqd.stats()
    names = {t["topic_name"]: [c["channel_name"] for c in t["channels"]] for t in stats["topics"]}
    assert names == {topic: ["durable"]}
    durable = nsqd.channel(topic, "durable")
    assert durable is not None and durable["paused"] is True and durable["depth"] == 5
    _post(nsqd, f"/channel/unpause?topic={topic}&channel=durable")
    again = consumer(nsqd, topic, "durable", rdy=5)
    assert sorted(m.body for m in again.read_messages(5)) == _bodies(5)
