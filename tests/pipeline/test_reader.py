"""The stream reader's offsets, partitions and commit-time FIN, driven as Spark's driver
drives it (no JVM), against real nsqd processes."""
from __future__ import annotations

import pickle
from datetime import datetime, timezone

import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

from nsq_spark import DrainSignal, NsqSourceError
from nsq_spark.batch_transfer import BatchFetchError, RowsRequest, fetch_rows
from nsq_spark.reader import NsqRowsPartition
from tests.pipeline.nsq_helpers import bodies, channel_counts, next_offset, publish, rows_between
from tests.servers import wait_for

TOPIC, CHANNEL = "events", "spark"


def test_a_batch_holds_each_message_once_and_fins_only_at_commit(servers, open_reader) -> None:
    nsqd = servers.nsqd()
    sent = bodies(50)
    publish(nsqd, TOPIC, sent)
    before = datetime.now(timezone.utc)
    reader = open_reader(topic=TOPIC, channel=CHANNEL, nsqd_tcp_addresses=nsqd.tcp_address)

    start = reader.initialOffset()
    end = next_offset(reader, start, until=lambda end: end["seq"] == 50)
    rows = rows_between(reader, start, end)

    assert sorted(r["body"] for r in rows) == sent
    assert len({r["id"] for r in rows}) == 50
    assert {(r["topic"], r["channel"], r["nsqd_address"], r["attempts"]) for r in rows} == \
        {(TOPIC, CHANNEL, nsqd.tcp_address, 1)}
    assert all(abs((r["timestamp"] - before).total_seconds()) < 60 for r in rows)
    assert len(reader.partitions(start, end)) == 2  # the default split
    counts = channel_counts(nsqd, TOPIC, CHANNEL)
    assert (counts["in_flight_count"], counts["finish_count"]) == (50, 0)

    reader.commit(end)
    wait_for(lambda: channel_counts(nsqd, TOPIC, CHANNEL)["finish_count"] == 50, message="50 FINs")
    assert channel_counts(nsqd, TOPIC, CHANNEL)["in_flight_count"] == 0


def test_read_limit_caps_each_batch(servers, open_reader) -> None:
    nsqd = servers.nsqd()
    publish(nsqd, TOPIC, bodies(25))
    reader = open_reader(topic=TOPIC, channel=CHANNEL, nsqd_tcp_addresses=nsqd.tcp_address,
                         max_messages_per_batch=10)
    assert reader.getDefaultReadLimit() == ReadMaxRows(10)

    start = reader.initialOffset()
    wait_for(lambda: reader.reportLatestOffset()["seq"] == 25, message="25 received")
    sizes, seen = [], []
    while len(seen) < 25:
        end = reader.latestOffset(start, ReadMaxRows(10))
        rows = rows_between(reader, start, end)
        sizes.append(len(rows))
        seen += [r["body"] for r in rows]
        reader.commit(end)
        start = end
    assert sizes == [10, 10, 5]
    assert sorted(seen) == bodies(25)
    # the engine's ReadAllAvailable overrides the option
    publish(nsqd, TOPIC, bodies(15, "more"))
    end = next_offset(reader, start, ReadAllAvailable(), until=lambda end: end["seq"] == 40)
    assert len(rows_between(reader, start, end)) == 15


def test_an_idle_stream_asks_for_one_empty_batch_to_commit_the_last(servers, open_reader) -> None:
    nsqd = servers.nsqd()
    publish(nsqd, TOPIC, bodies(5))
    reader = open_reader(topic=TOPIC, channel=CHANNEL, nsqd_tcp_addresses=nsqd.tcp_address)
    start = reader.initialOffset()
    end = next_offset(reader, start, until=lambda end: end["seq"] == 5)
    assert len(rows_between(reader, start, end)) == 5

    # nothing new: the offset moves anyway (flush), and that batch is empty
    flush = reader.latestOffset(end, ReadAllAvailable())
    assert (flush["seq"], flush["flush"]) == (5, 1)
    assert reader.partitions(end, flush) == []
    reader.commit(end)  # Spark commits batch N when it plans N + 1
    wait_for(lambda: channel_counts(nsqd, TOPIC, CHANNEL)["finish_count"] == 5, message="5 FINs")
    # everything committed: idle, the offset stays where it is
    assert reader.latestOffset(flush, ReadAllAvailable()) == flush


def test_held_messages_are_touched_past_the_message_timeout(servers, open_reader) -> None:
    nsqd = servers.nsqd(msg_timeout="1s")
    reader = open_reader(topic=TOPIC, channel=CHANNEL, nsqd_tcp_addresses=nsqd.tcp_address)
    # a second channel whose reader never touches: its messages time out, which shows time passing
    untouched = open_reader(topic=TOPIC, channel="untouched", nsqd_tcp_addresses=nsqd.tcp_address,
                            touch_interval="1h")
    start = reader.initialOffset()
    untouched.initialOffset()
    publish(nsqd, TOPIC, bodies(3))
    end = next_offset(reader, start, until=lambda end: end["seq"] == 3)

    wait_for(lambda: channel_counts(nsqd, TOPIC, "untouched")["timeout_count"] >= 6, timeout=15,
             message="the untouched channel timed out twice")
    assert channel_counts(nsqd, TOPIC, CHANNEL)["timeout_count"] == 0
    reader.commit(end)
    wait_for(lambda: channel_counts(nsqd, TOPIC, CHANNEL)["finish_count"] == 3, message="3 FINs")
    reader.latestOffset(end, ReadAllAvailable())  # no FIN failed


def test_rdy_is_clamped_to_what_nsqd_announced(servers, open_reader) -> None:
    nsqd = servers.nsqd(max_rdy_count=7)
    publish(nsqd, TOPIC, bodies(30))
    reader = open_reader(topic=TOPIC, channel=CHANNEL, nsqd_tcp_addresses=nsqd.tcp_address,
                         max_in_flight=1000)
    start = reader.initialOffset()
    end = next_offset(reader, start, until=lambda end: end["seq"] == 7)
    clients = (nsqd.channel(TOPIC, CHANNEL) or {})["clients"]
    assert [c["ready_count"] for c in clients] == [7]
    assert channel_counts(nsqd, TOPIC, CHANNEL)["depth"] == 23
    reader.commit(end)
    wait_for(lambda: reader.reportLatestOffset()["seq"] == 14, message="the next 7 after the FINs")


def test_max_in_flight_is_split_over_connections(servers, open_reader) -> None:
    nsqd = servers.nsqd()
    reader = open_reader(topic=TOPIC, channel=CHANNEL, nsqd_tcp_addresses=nsqd.tcp_address,
                         max_in_flight=5, connections_per_nsqd=2)
    reader.initialOffset()
    wait_for(lambda: sorted(c["ready_count"] for c in (nsqd.channel(TOPIC, CHANNEL) or {})["clients"]) == [2, 3],
             message="RDY 3 + 2")


def test_a_restarted_reader_neither_invents_nor_loses_rows(servers, open_reader) -> None:
    nsqd = servers.nsqd()
    publish(nsqd, TOPIC, bodies(8))
    first = open_reader(topic=TOPIC, channel=CHANNEL, nsqd_tcp_addresses=nsqd.tcp_address)
    old_start = first.initialOffset()
    old_end = next_offset(first, old_start, until=lambda end: end["seq"] == 8)
    assert len(rows_between(first, old_start, old_end)) == 8
    first.stop()  # the batch was planned, never committed: its messages go back to nsqd

    second = open_reader(topic=TOPIC, channel=CHANNEL, nsqd_tcp_addresses=nsqd.tcp_address)
    # Spark re-runs the planned batch with the offsets it logged: no rows from this reader
    assert rows_between(second, old_start, old_end) == []
    second.commit(old_start)
    # then plans on from the logged end: every message again, delivered a second time
    end = next_offset(second, old_end, until=lambda end: end["seq"] == 8)
    assert end["session"] != old_end["session"]
    rows = rows_between(second, old_end, end)
    assert sorted(r["body"] for r in rows) == bodies(8)
    assert {r["attempts"] for r in rows} == {2}
    second.commit(end)
    wait_for(lambda: channel_counts(nsqd, TOPIC, CHANNEL)["finish_count"] == 8, message="8 FINs")


def test_a_restart_with_nothing_to_read_still_leaves_the_old_session(servers, open_reader) -> None:
    nsqd = servers.nsqd()
    reader = open_reader(topic=TOPIC, channel=CHANNEL, nsqd_tcp_addresses=nsqd.tcp_address)
    old = {"session": "an-earlier-run", "seq": 40, "flush": 2}
    end = reader.latestOffset(old, ReadAllAvailable())
    assert end == {"session": reader.session, "seq": 0, "flush": 0}
    assert reader.partitions(old, end) == []
    assert reader.latestOffset(end, ReadAllAvailable()) == end


def test_a_lost_nsqd_fails_the_reader_loudly(servers, open_reader) -> None:
    nsqd = servers.nsqd()
    publish(nsqd, TOPIC, bodies(3))
    reader = open_reader(topic=TOPIC, channel=CHANNEL, nsqd_tcp_addresses=nsqd.tcp_address)
    start = reader.initialOffset()
    end = next_offset(reader, start, until=lambda end: end["seq"] == 3)
    nsqd.kill()

    def failed() -> str:
        try:
            reader.latestOffset(end, ReadAllAvailable())
        except NsqSourceError as err:
            return str(err)
        return ""
    message = wait_for(failed, message="the reader fails")
    assert nsqd.tcp_address in message and "connection lost" in message
    with pytest.raises(NsqSourceError):
        reader.commit(end)


def test_a_drained_nsqd_is_let_go_once_its_messages_are_committed_and_dialed_again(servers, open_reader) -> None:
    leaving, staying = servers.nsqd(), servers.nsqd()
    publish(leaving, TOPIC, bodies(3, "leaving"))
    reader = open_reader(topic=TOPIC, channel=CHANNEL, lookupd_poll_interval="200ms",
                         nsqd_tcp_addresses=f"{leaving.tcp_address},{staying.tcp_address}")
    start = reader.initialOffset()
    end = next_offset(reader, start, until=lambda end: end["seq"] == 3)
    assert leaving.post("/drain").status == 200  # nsqd waits for what is in flight, then exits
    assert len(rows_between(reader, start, end)) == 3
    reader.commit(end)
    assert wait_for(lambda: leaving.proc is not None and leaving.proc.poll() is not None,
                    message="the drained nsqd exits") and leaving.stop() == 0

    publish(staying, TOPIC, bodies(2, "staying"))
    later = next_offset(reader, end, until=lambda later: later["seq"] == 5)  # no failure raised
    leaving.start()
    publish(leaving, TOPIC, bodies(2, "back"))
    last = next_offset(reader, later, until=lambda last: last["seq"] == 7, timeout=20)
    assert sorted(r["body"] for r in rows_between(reader, end, last)) == sorted(bodies(2, "staying") + bodies(2, "back"))


def test_an_error_frame_fails_the_reader(servers, open_reader) -> None:
    nsqd = servers.nsqd(msg_timeout="1s")
    publish(nsqd, TOPIC, bodies(2))
    reader = open_reader(topic=TOPIC, channel=CHANNEL, nsqd_tcp_addresses=nsqd.tcp_address,
                         touch_interval="1h")
    start = reader.initialOffset()
    # untouched, both time out and come back: the reader holds each message twice
    end = next_offset(reader, start, until=lambda end: end["seq"] == 4, timeout=15)
    assert sorted(r["body"] for r in rows_between(reader, start, end)) == sorted(bodies(2) * 2)
    reader.commit(end)  # the second FIN of each ID is refused: E_FIN_FAILED

    def failed() -> str:
        try:
            reader.latestOffset(end, ReadAllAvailable())
        except NsqSourceError as err:
            return str(err)
        return ""
    assert "E_FIN_FAILED" in wait_for(failed, message="the reader fails")


def test_an_unreachable_nsqd_fails_the_first_offset_request(open_reader) -> None:
    from tests.servers import free_port
    reader = open_reader(topic=TOPIC, channel=CHANNEL, nsqd_tcp_addresses=f"127.0.0.1:{free_port()}")
    with pytest.raises(OSError):
        reader.initialOffset()


def test_nsqds_listed_by_lookupd_are_picked_up_while_running(servers, open_reader) -> None:
    lookupd = servers.lookupd()
    first = servers.nsqd(lookupd_tcp_address=lookupd.tcp_address)
    publish(first, TOPIC, bodies(4, "first"))
    wait_for(lambda: lookupd.producers(TOPIC), message="lookupd knows the topic")
    reader = open_reader(topic=TOPIC, channel=CHANNEL, lookupd_http_addresses=lookupd.http_address,
                         lookupd_poll_interval="200ms")
    start = reader.initialOffset()
    end = next_offset(reader, start, until=lambda end: end["seq"] == 4)

    second = servers.nsqd(lookupd_tcp_address=lookupd.tcp_address)
    publish(second, TOPIC, bodies(6, "second"))
    later = next_offset(reader, end, until=lambda later: later["seq"] == 10)
    rows = rows_between(reader, end, later)
    assert sorted(r["body"] for r in rows) == bodies(6, "second")
    assert {r["nsqd_address"] for r in rows} == {second.tcp_address}


def test_drain_hands_back_what_no_batch_took_and_reports_when_committed(servers, open_reader, tmp_path) -> None:
    nsqd = servers.nsqd()
    publish(nsqd, TOPIC, bodies(10))
    signal = DrainSignal(tmp_path / "drain")
    reader = open_reader(topic=TOPIC, channel=CHANNEL, nsqd_tcp_addresses=nsqd.tcp_address,
                         drain_file=signal.path, max_messages_per_batch=4)
    start = reader.initialOffset()
    wait_for(lambda: reader.reportLatestOffset()["seq"] == 10, message="10 received")
    end = reader.latestOffset(start, ReadMaxRows(4))
    assert len(rows_between(reader, start, end)) == 4

    signal.request()
    flush = reader.latestOffset(end, ReadMaxRows(4))  # takes nothing more; asks for the commit
    assert (flush["seq"], flush["flush"]) == (4, 1)
    wait_for(lambda: channel_counts(nsqd, TOPIC, CHANNEL)["requeue_count"] == 6, message="6 handed back")
    assert not signal.is_drained()
    reader.commit(end)
    assert reader.latestOffset(flush, ReadMaxRows(4)) == flush
    assert signal.is_drained()
    counts = channel_counts(nsqd, TOPIC, CHANNEL)
    assert (counts["finish_count"], counts["in_flight_count"], counts["depth"]) == (4, 0, 6)
    assert [c["ready_count"] for c in (nsqd.channel(TOPIC, CHANNEL) or {})["clients"]] == [0]


def test_stop_hands_back_every_held_message(servers, open_reader) -> None:
    nsqd = servers.nsqd()
    publish(nsqd, TOPIC, bodies(6))
    reader = open_reader(topic=TOPIC, channel=CHANNEL, nsqd_tcp_addresses=nsqd.tcp_address)
    start = reader.initialOffset()
    next_offset(reader, start, until=lambda end: end["seq"] == 6)
    reader.stop()
    counts = wait_for(lambda: (lambda c: c if c["depth"] == 6 else None)(channel_counts(nsqd, TOPIC, CHANNEL)),
                      message="6 back in the queue")
    assert counts["in_flight_count"] == 0
    assert (nsqd.channel(TOPIC, CHANNEL) or {})["clients"] == []


def test_the_reader_pickles_without_its_connections(servers, open_reader) -> None:
    nsqd = servers.nsqd()
    publish(nsqd, TOPIC, bodies(2))
    reader = open_reader(topic=TOPIC, channel=CHANNEL, nsqd_tcp_addresses=nsqd.tcp_address)
    start = reader.initialOffset()
    end = next_offset(reader, start, until=lambda end: end["seq"] == 2)
    copy = pickle.loads(pickle.dumps(reader))
    partitions = [pickle.loads(pickle.dumps(p)) for p in reader.partitions(start, end)]
    assert sorted(row["body"] for p in partitions for b in copy.read(p) for row in b.to_pylist()) == bodies(2)
    assert len((nsqd.channel(TOPIC, CHANNEL) or {})["clients"]) == 1  # the copy opened nothing


def test_tasks_fetch_exactly_their_rows_and_only_with_the_token(servers, open_reader) -> None:
    nsqd = servers.nsqd()
    publish(nsqd, TOPIC, bodies(30))
    reader = open_reader(topic=TOPIC, channel=CHANNEL, nsqd_tcp_addresses=nsqd.tcp_address, partitions=3)
    start = reader.initialOffset()
    end = next_offset(reader, start, until=lambda end: end["seq"] == 30)
    partitions = [pickle.loads(pickle.dumps(p)) for p in reader.partitions(start, end)]
    assert all(isinstance(p, NsqRowsPartition) and p.address.startswith("127.0.0.1:") for p in partitions)
    per_task = [[row["body"] for batch in reader.read(p) for row in batch.to_pylist()] for p in partitions]
    assert [len(rows) for rows in per_task] == [10, 10, 10]
    assert sorted(sum(per_task, [])) == bodies(30)

    first = partitions[0]
    with pytest.raises(BatchFetchError, match="wrong token"):
        fetch_rows(first.address, "0" * 32, first.request)
    with pytest.raises(BatchFetchError, match="not held"):  # rows past what was received
        fetch_rows(first.address, first.token, RowsRequest(first.request.session, 25, 31))
    reader.commit(end)
    with pytest.raises(BatchFetchError, match="not held"):  # a committed batch is gone (FINed)
        list(reader.read(first))


def test_inline_partitions_carry_their_rows(servers, open_reader) -> None:
    nsqd = servers.nsqd()
    publish(nsqd, TOPIC, bodies(20))
    reader = open_reader(topic=TOPIC, channel=CHANNEL, nsqd_tcp_addresses=nsqd.tcp_address,
                         batch_transfer="inline")
    start = reader.initialOffset()
    end = next_offset(reader, start, until=lambda end: end["seq"] == 20)
    partitions = reader.partitions(start, end)
    assert [p.batch.num_rows for p in partitions] == [10, 10]
    reader.commit(end)  # the rows went with the partitions: readable after the FIN
    assert sorted(r["body"] for p in partitions for b in reader.read(p) for r in b.to_pylist()) == bodies(20)


def test_the_first_batch_holds_what_nsqd_delivered_right_after_subscribing(servers, open_reader) -> None:
    nsqd = servers.nsqd()
    publish(nsqd, TOPIC, bodies(300))
    reader = open_reader(topic=TOPIC, channel=CHANNEL, nsqd_tcp_addresses=nsqd.tcp_address,
                         max_in_flight=1000)
    start = reader.initialOffset()
    end = reader.latestOffset(start, ReadAllAvailable())  # asked once, at once, as Spark does
    assert end["seq"] == 300
