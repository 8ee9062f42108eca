"""What nsqd does with runs of FINs and PUBs that arrive in one write, and with messages
shared by several channels: the same answers, in the same order, as one at a time."""
from __future__ import annotations

from typing import Callable

from nsq_protocol import commands
from tests.broker.conftest import Connect
from tests.broker.wire import WireConn
from tests.conftest import Servers
from tests.servers import Nsqd, http, wait_for

Consumer = Callable[..., WireConn]
UNKNOWN_ID = b"ffffffffffffffff"


def _create(server: Nsqd, topic: str, *channels: str) -> None:
    assert http("POST", server.url(f"/topic/create?topic={topic}"))[0] == 200
    for channel in channels:
        assert http("POST", server.url(f"/channel/create?topic={topic}&channel={channel}"))[0] == 200


def test_a_run_of_fins_with_unknown_and_repeated_ids_fails_only_those(
        nsqd: Nsqd, connect: Connect, consumer: Consumer, topic: str) -> None:
    _create(nsqd, topic, "ch")
    pub = connect(nsqd)
    pub.mpub(topic, [b"m%d" % i for i in range(6)])
    pub.expect_ok()
    sub = consumer(nsqd, topic, "ch", rdy=6)
    ids = [m.id for m in sub.read_messages(6)]
    sub.send(b"".join([commands.fin(ids[0]), commands.fin(ids[1]), commands.fin(UNKNOWN_ID),
                       commands.fin(ids[2]), commands.fin(ids[2]), commands.fin(ids[3]),
                       commands.fin(ids[4]), commands.fin(ids[5])]))
    unknown = sub.expect_error("E_FIN_FAILED")
    assert unknown.data == b"E_FIN_FAILED FIN " + UNKNOWN_ID + b" failed ID not in flight"
    repeated = sub.expect_error("E_FIN_FAILED")
    assert repeated.data == b"E_FIN_FAILED FIN " + ids[2] + b" failed ID not in flight"
    stats = wait_for(lambda: (c := nsqd.channel(topic, "ch")) and c["in_flight_count"] == 0 and c)
    assert stats["depth"] == 0
    (client,) = stats["clients"]
    assert client["finish_count"] == 6 and client["in_flight_count"] == 0
    sub.nop()  # the connection is still open and usable
    sub.expect_silence(0.2)


def test_a_run_of_fins_cannot_finish_another_consumers_messages(
        nsqd: Nsqd, connect: Connect, consumer: Consumer, topic: str) -> None:
    _create(nsqd, topic, "ch")
    first = consumer(nsqd, topic, "ch", rdy=1)
    pub = connect(nsqd)
    pub.pub(topic, b"for the first")
    pub.expect_ok()
    theirs = first.read_message()
    second = consumer(nsqd, topic, "ch", rdy=1)
    pub.pub(topic, b"for the second")
    pub.expect_ok()
    mine = second.read_message()
    second.send(commands.fin(theirs.id) + commands.fin(mine.id))
    refused = second.expect_error("E_FIN_FAILED")
    assert refused.data == b"E_FIN_FAILED FIN " + theirs.id + b" failed client does not own message"
    wait_for(lambda: nsqd.channel(topic, "ch")["in_flight_count"] == 1)  # type: ignore[index]
    first.fin(theirs.id)
    wait_for(lambda: nsqd.channel(topic, "ch")["in_flight_count"] == 0)  # type: ignore[index]


def test_pipelined_pubs_are_each_answered_and_delivered_in_order(
        nsqd: Nsqd, connect: Connect, consumer: Consumer, topic: str) -> None:
    other = topic + "-other"
    _create(nsqd, topic, "ch")
    _create(nsqd, other, "ch")
    bodies = [b"p%03d" % i for i in range(200)]
    pub = connect(nsqd)
    stream = [commands.pub(topic, b) for b in bodies[:120]] + [commands.pub(other, b"elsewhere")]
    stream += [commands.pub(topic, b) for b in bodies[120:]]
    pub.send(b"".join(stream))
    for _ in range(len(stream)):
        pub.expect_ok()
    sub = consumer(nsqd, topic, "ch", rdy=200)
    got = sub.read_messages(200)
    assert [m.body for m in got] == bodies
    assert len({m.id for m in got}) == 200 and all(m.attempts == 1 for m in got)
    assert [m.body for m in consumer(nsqd, other, "ch", rdy=1).read_messages(1)] == [b"elsewhere"]


def test_pipelined_pubs_stop_at_the_first_bad_one(nsqd: Nsqd, connect: Connect, consumer: Consumer,
                                                  topic: str) -> None:
    _create(nsqd, topic, "ch")
    pub = connect(nsqd)
    pub.send(commands.pub(topic, b"one") + commands.pub(topic, b"two") + commands.pub(topic, b"")
             + commands.pub(topic, b"never"))
    pub.expect_ok()
    pub.expect_ok()
    pub.expect_fatal("E_BAD_MESSAGE")
    sub = consumer(nsqd, topic, "ch", rdy=10)
    assert [m.body for m in sub.read_messages(2)] == [b"one", b"two"]
    sub.expect_silence(0.3)


def test_pipelined_pubs_beyond_the_memory_queue_go_to_disk(servers: Servers, connect: Connect,
                                                           consumer: Consumer, topic: str) -> None:
    small = servers.nsqd(mem_queue_size=5)
    _create(small, topic, "ch")
    bodies = [b"d%02d" % i for i in range(30)]
    pub = connect(small)
    pub.send(b"".join(commands.pub(topic, b) for b in bodies))
    for _ in bodies:
        pub.expect_ok()
    stats = wait_for(lambda: (c := small.channel(topic, "ch")) and c["depth"] == 30 and c)
    assert stats["backend_depth"] == 25
    sub = consumer(small, topic, "ch", rdy=30)
    assert sorted(m.body for m in sub.read_messages(30)) == bodies


def test_pubs_one_at_a_time_to_a_topic_without_channels_fill_memory_then_disk(
        servers: Servers, connect: Connect, consumer: Consumer, topic: str) -> None:
    small = servers.nsqd(mem_queue_size=5)
    bodies = [b"s%02d" % i for i in range(12)]
    pub = connect(small)
    for body in bodies:
        pub.pub(topic, body)
        pub.expect_ok()
    stats = small.topic(topic)
    assert stats is not None
    assert (stats["depth"], stats["backend_depth"], stats["message_count"]) == (12, 7, 12)
    assert stats["message_bytes"] == sum(map(len, bodies))
    sub = consumer(small, topic, "ch", rdy=12)
    delivered = sub.read_messages(12)
    assert sorted(m.body for m in delivered) == bodies
    assert len({m.id for m in delivered}) == 12


def test_channels_sharing_a_message_keep_their_own_attempts(
        nsqd: Nsqd, connect: Connect, consumer: Consumer, topic: str) -> None:
    _create(nsqd, topic, "a", "b")
    pub = connect(nsqd)
    pub.mpub(topic, [b"shared-1", b"shared-2"])
    pub.expect_ok()
    a = consumer(nsqd, topic, "a", rdy=2)
    first = a.read_messages(2)
    a.req(first[0].id, 0)
    again = a.read_message()
    assert (again.id, again.body, again.attempts) == (first[0].id, b"shared-1", 2)
    b = consumer(nsqd, topic, "b", rdy=2)
    on_b = b.read_messages(2)
    assert [(m.id, m.body, m.attempts) for m in on_b] == [(m.id, m.body, 1) for m in first]
    assert on_b[0].timestamp == first[0].timestamp


def test_a_consumer_with_rdy_1_gets_fresh_and_requeued_messages_one_at_a_time(
        nsqd: Nsqd, connect: Connect, consumer: Consumer, topic: str) -> None:
    _create(nsqd, topic, "ch")
    pub = connect(nsqd)
    pub.mpub(topic, [b"one", b"two"])
    pub.expect_ok()
    sub = consumer(nsqd, topic, "ch", rdy=1)
    first = sub.read_message()
    assert (first.body, first.attempts) == (b"one", 1)
    sub.expect_silence(0.1)  # RDY 1: nothing more while one is in flight
    sub.req(first.id, 0)  # back to the end of the queue, as in nsqd
    second = sub.read_message()
    assert (second.body, second.attempts) == (b"two", 1)
    sub.fin(second.id)
    again = sub.read_message()
    assert (again.id, again.body, again.attempts) == (first.id, b"one", 2)
    sub.fin(again.id)
    stats = wait_for(lambda: (c := nsqd.channel(topic, "ch")) and c["in_flight_count"] == 0 and c)
    assert (stats["depth"], stats["requeue_count"]) == (0, 1)
    (client,) = stats["clients"]
    assert (client["finish_count"], client["message_count"]) == (2, 3)


def test_rdy_1_consumers_finishing_one_at_a_time_get_every_message_once_in_turn(
        nsqd: Nsqd, connect: Connect, consumer: Consumer, topic: str) -> None:
    """The lone-FIN path: a FIN alone in a read hands the consumer its next message at
    once, and the messages still go out once each, in order, with their attempts."""
    _create(nsqd, topic, "ch")
    subs = [consumer(nsqd, topic, "ch", rdy=1) for _ in range(3)]
    pub = connect(nsqd)
    bodies = [b"m%02d" % i for i in range(30)]
    pub.mpub(topic, bodies)
    pub.expect_ok()
    got: list[bytes] = []
    for _ in range(10):
        for sub in subs:
            message = sub.read_message()
            assert message.attempts == 1
            got.append(message.body)
            sub.fin(message.id)
    assert sorted(got) == bodies
    for index, sub in enumerate(subs):  # each saw its messages in publish order
        assert got[index::3] == sorted(got[index::3])
        sub.expect_silence(0.1)
    stats = wait_for(lambda: (c := nsqd.channel(topic, "ch")) and c["in_flight_count"] == 0 and c)
    assert stats["depth"] == 0
    assert sorted((c["finish_count"], c["message_count"], c["in_flight_count"]) for c in stats["clients"]) == [
        (10, 10, 0)] * 3


def test_a_lone_fin_of_an_unknown_or_foreign_id_fails_as_before(
        nsqd: Nsqd, connect: Connect, consumer: Consumer, topic: str) -> None:
    _create(nsqd, topic, "ch")
    first = consumer(nsqd, topic, "ch", rdy=1)
    second = consumer(nsqd, topic, "ch", rdy=1)
    pub = connect(nsqd)
    pub.mpub(topic, [b"a", b"b", b"c"])
    pub.expect_ok()
    theirs, mine = first.read_message(), second.read_message()
    second.send(commands.fin(theirs.id))
    refused = second.expect_error("E_FIN_FAILED")
    assert refused.data == b"E_FIN_FAILED FIN " + theirs.id + b" failed client does not own message"
    second.send(commands.fin(UNKNOWN_ID))
    unknown = second.expect_error("E_FIN_FAILED")
    assert unknown.data == b"E_FIN_FAILED FIN " + UNKNOWN_ID + b" failed ID not in flight"
    second.fin(mine.id)
    third = second.read_message()  # still in the turn after the refusals
    assert third.body == b"c"
    second.send(commands.fin(mine.id))  # FINed already: no longer in flight
    assert second.expect_error("E_FIN_FAILED").data == b"E_FIN_FAILED FIN " + mine.id + b" failed ID not in flight"
    first.fin(theirs.id)
    second.fin(third.id)
    wait_for(lambda: nsqd.channel(topic, "ch")["in_flight_count"] == 0)  # type: ignore[index]


def test_a_consumer_that_sent_cls_gets_nothing_more_after_its_lone_fin(
        nsqd: Nsqd, connect: Connect, consumer: Consumer, topic: str) -> None:
    _create(nsqd, topic, "ch")
    sub = consumer(nsqd, topic, "ch", rdy=1)
    pub = connect(nsqd)
    pub.mpub(topic, [b"a", b"b"])
    pub.expect_ok()
    held = sub.read_message()
    sub.send(commands.cls())
    assert sub.read_frame().data == b"CLOSE_WAIT"
    sub.send(commands.fin(held.id))
    wait_for(lambda: nsqd.channel(topic, "ch")["in_flight_count"] == 0)  # type: ignore[index]
    assert nsqd.channel(topic, "ch")["depth"] == 1  # type: ignore[index]
