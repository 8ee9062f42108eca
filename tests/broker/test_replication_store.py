"""What a backup keeps of its owners' messages: its log replayed after a restart (a torn
last frame dropped), the copies forgotten once every channel finished them, the log cut
down when nothing is left, and the merge of another backup's copies for an adoption."""
from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path

from nsqd.message import encode_payload
from nsqd.payload_run import PayloadRun
from nsqd.replication import store as store_module, wire
from nsqd.replication.generations import Generations
from nsqd.replication.store import ReplicaStore
from nsqd.replication.wire import Entry

OWNER = "127.0.0.2:4153"


def msg(n: int) -> Entry:
    msg_id = b"%016x" % n
    return Entry(encode_payload(msg_id, b"body-%d" % n, 0))


def apply(store: ReplicaStore, raw: bytes) -> None:
    [(frame, _)] = wire.raw_frames(raw)
    store.apply(OWNER, frame, raw)


def test_a_restarted_backup_has_what_it_wrote_and_drops_a_torn_tail(tmp_path: Path) -> None:
    store = ReplicaStore(str(tmp_path), durable=True)
    apply(store, wire.channels("t", ["a", "b"]))
    apply(store, wire.append(1, "t", [msg(1), msg(2), msg(3)]))
    apply(store, wire.fin("t", "a", [b"%016x" % 1]))
    apply(store, wire.fin("t", "b", [b"%016x" % 1, b"%016x" % 2]))
    store.close()
    log = tmp_path / "replication" / "127.0.0.2_4153.log"
    with open(log, "ab") as f:
        f.write(wire.append(2, "t", [msg(4)])[:-5])  # a crash in the middle of a write

    again = ReplicaStore(str(tmp_path), durable=True)
    again.load()
    shard = again.shards[OWNER]["t"]
    assert list(shard.messages) == [b"%016x" % 2, b"%016x" % 3]  # 1 finished by both channels
    assert [(live.entry.payload[10:26], live.channels) for live in shard.live()] == [
        (b"%016x" % 2, ["a"]), (b"%016x" % 3, ["a", "b"])]
    assert log.stat().st_size == sum(len(raw) for _, raw in wire.raw_frames(log.read_bytes()))
    again.close()


def test_messages_wait_for_a_channel_and_a_deleted_channel_owes_nothing(tmp_path: Path) -> None:
    store = ReplicaStore(str(tmp_path), durable=False)
    apply(store, wire.append(1, "t", [msg(1)]))
    assert [live.channels for live in store.shards[OWNER]["t"].live()] == [None]
    apply(store, wire.channels("t", ["a", "b"]))
    apply(store, wire.fin("t", "a", [b"%016x" % 1]))
    assert store.held(OWNER) == 1
    apply(store, wire.channels("t", ["a"]))  # b deleted
    assert store.held(OWNER) == 0


def test_merging_an_older_channel_list_owes_no_channel_less(tmp_path: Path) -> None:
    """The adopter knows channels a and b; another backup has not heard of b yet. Merging
    its copies must not leave the adopter believing a's FIN was the last one owed."""
    adopter = ReplicaStore(str(tmp_path), durable=False)
    apply(adopter, wire.channels("t", ["a", "b"]))
    apply(adopter, wire.append(1, "t", [msg(1)]))
    apply(adopter, wire.fin("t", "a", [b"%016x" % 1]))
    for raw in (wire.channels("t", ["a"]),):
        [(frame, _)] = wire.raw_frames(wire.pulled(OWNER, raw))
        assert frame.inner is not None
        adopter.merge(OWNER, frame.inner)
    assert [live.channels for live in adopter.shards[OWNER]["t"].live()] == [["b"]]


async def test_a_log_with_nothing_left_is_cut_down_to_its_channels(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(store_module, "COMPACT_BYTES", 2000)
    store = ReplicaStore(str(tmp_path), durable=True)
    apply(store, wire.channels("t", ["a"]))
    for n in range(1, 40):
        apply(store, wire.append(n, "t", [msg(n)]))
        apply(store, wire.fin("t", "a", [b"%016x" % n]))
    committed = asyncio.Event()
    store.after_commit(committed.set)
    await asyncio.wait_for(committed.wait(), 5)
    log = tmp_path / "replication" / "127.0.0.2_4153.log"
    assert log.stat().st_size < 200
    apply(store, wire.append(99, "t", [msg(99)]))  # written after the cut, to the new file
    store.close()
    again = ReplicaStore(str(tmp_path), durable=True)
    again.load()
    assert again.shards[OWNER]["t"].channels == ["a"]
    assert list(again.shards[OWNER]["t"].messages) == [b"%016x" % 99]
    again.close()
    assert not any(name.endswith(".tmp") for name in os.listdir(tmp_path / "replication"))


def test_a_log_is_whole_from_its_snapshot_s_end_and_keeps_its_generation(tmp_path: Path) -> None:
    """A restarted backup asks for a snapshot again if the last one was cut off (RESET
    without SYNCED); the generation of the copies survives the restart; copies of an older
    generation go when the owner speaks in a newer one."""
    store = ReplicaStore(str(tmp_path), durable=False)
    store.begin(OWNER, 3)
    assert not store.keeps_log(OWNER)
    apply(store, wire.reset())
    apply(store, wire.append(0, "t", [msg(1)]))
    apply(store, wire.synced(7))
    assert store.keeps_log(OWNER)
    apply(store, wire.reset())  # a second snapshot, cut off
    apply(store, wire.append(0, "t", [msg(2)]))
    store.close()

    again = ReplicaStore(str(tmp_path), durable=False)
    again.load()
    assert again.generation(OWNER) == 3 and not again.keeps_log(OWNER)
    assert again.held(OWNER) == 2  # a snapshot adds, it never forgets
    again.begin(OWNER, 3)
    assert again.held(OWNER) == 2
    again.begin(OWNER, 4)  # the owner moved on: generation 3 was adopted
    assert again.held(OWNER) == 0 and again.generation(OWNER) == 4
    again.close()


def test_copies_know_the_life_of_their_owner_across_a_restart(tmp_path: Path) -> None:
    """The incarnation an owner said in HELLO is kept in the log's head: after a restart,
    copies held of it are told apart from a later life of the owner's data path (which
    says an older generation, or another incarnation) and from the same life."""
    store = ReplicaStore(str(tmp_path), durable=False)
    store.begin(OWNER, 2, "life-a")
    apply(store, wire.append(0, "t", [msg(1)]))
    store.close()

    again = ReplicaStore(str(tmp_path), durable=False)
    again.load()
    assert again.incarnations[OWNER] == "life-a" and again.generation(OWNER) == 2
    assert not again.other_life(OWNER, 2, "life-a")
    assert not again.other_life(OWNER, 2, "")  # an owner that does not say: only its generation counts
    assert again.other_life(OWNER, 1, "")  # a generation gone back: a lost data path
    assert again.other_life(OWNER, 2, "life-b") and again.other_life(OWNER, 3, "life-b")
    apply(again, wire.empty("t", "", [b"%016x" % 1]))  # dropped: nothing live, nothing to adopt
    assert again.held(OWNER) == 0 and not again.other_life(OWNER, 1, "life-b")
    again.begin(OWNER, 1, "life-b")  # what is left of life a (its channels) goes
    assert again.incarnations[OWNER] == "life-b" and again.generation(OWNER) == 1
    again.close()


def test_a_data_path_keeps_its_incarnation_until_it_is_lost(tmp_path: Path) -> None:
    first = Generations.load(str(tmp_path / "replication"))
    assert Generations.load(str(tmp_path / "replication")).incarnation == first.incarnation
    shutil.rmtree(tmp_path / "replication")
    assert Generations.load(str(tmp_path / "replication")).incarnation != first.incarnation


def mid(n: int) -> bytes:
    return b"%016x" % n


def test_an_emptied_channel_owes_nothing_but_what_the_topic_still_queues(tmp_path: Path) -> None:
    store = ReplicaStore(str(tmp_path), durable=False)
    apply(store, wire.channels("t", ["a", "b"]))
    apply(store, wire.append(1, "t", [msg(1), msg(2), msg(3)]))
    apply(store, wire.empty("t", "a", [mid(1), mid(2)]))  # 3 still in the topic's queue: a gets it later
    apply(store, wire.append(2, "t", [msg(4)]))  # published after the empty: a is owed it
    owed = {live.entry.payload[10:26]: live.channels for live in store.shards[OWNER]["t"].live()}
    assert owed == {mid(1): ["b"], mid(2): ["b"], mid(3): ["a", "b"], mid(4): ["a", "b"]}
    apply(store, wire.empty("t", "b", [mid(1), mid(2), mid(3), mid(4)]))
    assert set(store.shards[OWNER]["t"].messages) == {mid(3), mid(4)}
    apply(store, wire.empty("t", "a", [mid(1), mid(2)]))  # a resend after a reconnect: the same
    assert set(store.shards[OWNER]["t"].messages) == {mid(3), mid(4)}


def test_an_emptied_topic_queue_a_deleted_last_channel_and_a_deleted_topic_drop_copies(tmp_path: Path) -> None:
    store = ReplicaStore(str(tmp_path), durable=False)
    apply(store, wire.append(1, "t", [msg(1), msg(2)]))
    apply(store, wire.empty("t", "", [mid(1), mid(2)]))  # no channel: every copy was in the topic's queue
    assert store.held(OWNER) == 0
    apply(store, wire.channels("t", ["a"]))
    apply(store, wire.append(2, "t", [msg(3), msg(4), msg(5)]))
    apply(store, wire.empty("t", "", [mid(5)]))  # only 5 waited in the topic's queue
    assert set(store.shards[OWNER]["t"].messages) == {mid(3), mid(4)}
    apply(store, wire.channels("t", []))
    apply(store, wire.empty("t", "", [mid(3)]))  # the last channel deleted; 4 still queued
    assert [(live.entry.payload[10:26], live.channels) for live in store.shards[OWNER]["t"].live()] == [(mid(4), None)]
    apply(store, wire.empty("t", "", [mid(4)]))  # the topic deleted
    apply(store, wire.channels("t", []))
    assert store.held(OWNER) == 0


async def test_pauses_and_requeue_delays_survive_a_restart_a_snapshot_and_compaction(tmp_path: Path, monkeypatch) -> None:
    from nsqd.replication.backup_server import shard_frames
    store = ReplicaStore(str(tmp_path), durable=True)
    apply(store, wire.channels("t", ["a", "b"]))
    apply(store, wire.append(1, "t", [msg(1), msg(2)]))
    apply(store, wire.pause("t", "", True))
    apply(store, wire.pause("t", "a", True))
    apply(store, wire.pause("t", "a", False))
    apply(store, wire.pause("t", "b", True))
    apply(store, wire.req("t", "a", 123_000, [mid(1)]))
    store.close()
    again = ReplicaStore(str(tmp_path), durable=True)
    again.load()
    shard = again.shards[OWNER]["t"]
    assert shard.paused == {"": True, "a": False, "b": True}
    assert [live.due for live in shard.live()] == [{"a": 123_000}, {}]
    # a snapshot (or a PULL's answer) rebuilds the same state
    copy = ReplicaStore(str(tmp_path / "copy"), durable=False)
    for raw in shard_frames(again, OWNER):
        apply(copy, raw)
    assert copy.shards[OWNER]["t"].paused == shard.paused
    assert [live.due for live in copy.shards[OWNER]["t"].live()] == [{"a": 123_000}, {}]
    # a merge keeps the adopter's own pause state, and fills in what it lacks
    copy.merge(OWNER, wire.Frame(wire.Kind.PAUSE, topic="t", channel="b", paused=False))
    copy.merge(OWNER, wire.Frame(wire.Kind.PAUSE, topic="u", channel="", paused=True))
    assert copy.shards[OWNER]["t"].paused["b"] is True and copy.shards[OWNER]["u"].paused == {"": True}
    # finished by both channels: the delay goes with the copy; compaction keeps the pauses
    monkeypatch.setattr(store_module, "COMPACT_BYTES", 0)
    apply(again, wire.fin("t", "a", [mid(1), mid(2)]))
    apply(again, wire.fin("t", "b", [mid(1), mid(2)]))
    await _commit(again)
    assert again.held(OWNER) == 0
    again.close()
    third = ReplicaStore(str(tmp_path), durable=True)
    third.load()
    assert third.shards[OWNER]["t"].paused == {"": True, "a": False, "b": True}
    assert third.shards[OWNER]["t"].due == {}
    third.close()


async def _commit(store: ReplicaStore) -> None:
    done = asyncio.Event()
    store.after_commit(done.set)
    await done.wait()


def test_an_owners_own_publishes_kept_as_batches_act_as_their_copies(tmp_path: Path) -> None:
    """``append_own`` (the owner's own shard, one record per publish) holds what applying
    the same APPEND frames holds: the messages in order with their due time, counted
    before they are indexed, finished per channel, replayed from the log."""
    store = ReplicaStore(str(tmp_path), durable=False)
    run = PayloadRun.of([msg(n).payload for n in (1, 2, 3)])
    apply(store, wire.channels("t", ["a", "b"]))
    for seq, (batch, defer) in enumerate([(run, 0), ([msg(4).payload], 777)], 1):
        store.append_own(OWNER, "t", batch, defer, wire.append_fresh(seq, "t", batch, defer))
    assert store.held(OWNER) == 4
    apply(store, wire.fin("t", "a", [mid(2), mid(4)]))
    apply(store, wire.fin("t", "b", [mid(2)]))
    shard = store.shards[OWNER]["t"]
    assert [(live.entry.payload[10:26], live.entry.defer_until_ms, live.channels) for live in shard.live()] == [
        (mid(1), 0, ["a", "b"]), (mid(3), 0, ["a", "b"]), (mid(4), 777, ["b"])]
    store.close()

    again = ReplicaStore(str(tmp_path), durable=False)
    again.load()
    assert again.shards[OWNER]["t"].live() == shard.live()
    again.close()


def test_a_backups_copied_runs_count_once_when_resent_before_or_after_they_are_indexed(tmp_path: Path) -> None:
    """APPEND_RUN frames as a backup gets them (kept as they came): a run resent after a
    reconnect, whether or not something indexed the first by then, holds its messages
    once; FINs, the live list and the replayed log agree with that."""
    store = ReplicaStore(str(tmp_path), durable=False)
    apply(store, wire.channels("t", ["a"]))
    first = wire.append_fresh(1, "t", PayloadRun.of([msg(n).payload for n in (1, 2, 3)]), 0)
    second = wire.append_fresh(2, "t", PayloadRun.of([msg(n).payload for n in (4, 5)]), 500)
    for raw in (first, second, first):  # the first resent before anything is indexed
        apply(store, raw)
    assert store.held(OWNER) == 5
    apply(store, wire.fin("t", "a", [mid(1)]))  # indexes what is held
    apply(store, second)  # resent after
    assert store.held(OWNER) == 4
    shard = store.shards[OWNER]["t"]
    assert [(live.entry.payload[10:26], live.entry.defer_until_ms) for live in shard.live()] == [
        (mid(2), 0), (mid(3), 0), (mid(4), 500), (mid(5), 500)]
    store.close()

    again = ReplicaStore(str(tmp_path), durable=False)
    again.load()
    assert again.held(OWNER) == 4 and again.shards[OWNER]["t"].live() == shard.live()
    again.close()


async def test_frames_nothing_waits_for_reach_the_log_soon_in_one_write_and_at_close(tmp_path: Path,
                                                                                  monkeypatch) -> None:
    """The owner's own shard: written after a short delay, the publishes of every loop
    turn meanwhile in one write; what is unwritten at close is written then."""
    store = ReplicaStore(str(tmp_path), durable=False)
    log = tmp_path / "replication" / "127.0.0.2_4153.log"
    writes = 0
    real_write = os.write

    def counting_write(fd: int, data: bytes) -> int:
        nonlocal writes
        writes += 1
        return real_write(fd, data)

    monkeypatch.setattr(store_module.os, "write", counting_write)
    frames = [wire.append(n, "t", [msg(n)]) for n in (1, 2, 3, 4)]
    for raw in frames[:3]:
        apply(store, raw)
        store.write_soon()
        await asyncio.sleep(0)  # loop turns go by: nothing is written yet
    assert not log.exists() or log.stat().st_size == 0
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 5
    while not (log.exists() and log.read_bytes().endswith(frames[2])):
        assert loop.time() < deadline, "the frames never reached the log"
        await asyncio.sleep(store_module.OWN_LOG_DELAY / 5)
    assert writes == 2  # the log's head, then the three frames at once
    apply(store, frames[3])
    store.write_soon()
    store.close()  # before the delay passed
    monkeypatch.undo()
    again = ReplicaStore(str(tmp_path), durable=False)
    again.load()
    assert list(again.shards[OWNER]["t"].messages) == [b"%016x" % n for n in (1, 2, 3, 4)]
    again.close()
