"""The durable-mode disk queue: entries leave the disk only once acknowledged.

A crash is simulated by opening a second queue on the same directory without closing the
first: every write already went to the operating system, as with ``kill -9``.
"""
from __future__ import annotations

import time
from pathlib import Path

from nsq_protocol.message import encode_message
from nsqd.diskqueue import DiskQueue
from nsqd.durable_queue import DurableDiskQueue
from nsqd.group_commit import run_jobs

MIN_SIZE = 26
MAX_SIZE = 1024 + 26


def open_queue(path: Path, cls: type[DiskQueue] = DurableDiskQueue, **overrides: object) -> DurableDiskQueue:
    options: dict[str, object] = dict(max_bytes_per_file=1 << 20, min_msg_size=MIN_SIZE, max_msg_size=MAX_SIZE,
                                      sync_every=2500, sync_timeout=2.0)
    options.update(overrides)
    return cls("orders", path, **options)  # type: ignore[return-value, arg-type]


def payload(number: int) -> bytes:
    return encode_message(f"{number:016x}".encode(), number, 1, b"body-%d" % number)


def number_of(data: bytes) -> int:
    return int(data[10:26], 16)


def commit_round(*queues: DurableDiskQueue) -> None:
    """What one forced group-commit round does."""
    jobs = [job for q in queues if (job := q.sync_job(time.monotonic(), True)) is not None]
    run_jobs(jobs)
    for job in jobs:
        if job.on_done is not None:
            job.on_done()


def put_synced(queue: DurableDiskQueue, items: list[bytes]) -> None:
    queue.put_many(items)
    commit_round(queue)


def read_all(queue: DurableDiskQueue) -> list[tuple[int, int]]:
    out = []
    while (entry := queue.get_entry()) is not None:
        out.append((number_of(entry[0]), entry[1]))
    return out


def segments(path: Path) -> list[str]:
    return sorted(p.name for p in path.iterdir() if ".diskqueue.0" in p.name)


def test_unacknowledged_entries_come_back_after_a_crash(tmp_path: Path) -> None:
    queue = open_queue(tmp_path)
    put_synced(queue, [payload(n) for n in range(6)])
    entries = read_all(queue)
    assert [n for n, _ in entries] == list(range(6))
    tokens = dict(entries)
    for n in (0, 1, 3, 5):
        queue.ack(tokens[n])
    assert queue.uncommitted == 4  # 2, and everything after it
    commit_round(queue)

    again = open_queue(tmp_path)
    # 2 was never acknowledged: it and everything after it is read again
    assert [n for n, _ in read_all(again)] == [2, 3, 4, 5]


def test_appended_data_survives_a_crash_before_any_metadata(tmp_path: Path) -> None:
    queue = open_queue(tmp_path)
    commit_round(queue)
    queue.put_many([payload(n) for n in range(5)])
    queue.put(payload(5))
    commit_round_data_only = [job for job in [queue.sync_job(time.monotonic(), False)] if job]
    run_jobs(commit_round_data_only)

    again = open_queue(tmp_path)
    assert [n for n, _ in read_all(again)] == list(range(6))


def test_unread_is_what_is_not_read_yet_written_but_unsynced_too(tmp_path: Path) -> None:
    queue = open_queue(tmp_path, max_bytes_per_file=200)  # a few entries per segment
    put_synced(queue, [payload(n) for n in range(6)])
    taken = [queue.get_entry() for _ in range(2)]
    assert all(entry is not None for entry in taken)
    queue.put_many([payload(6), payload(7)])  # not fsynced: not readable yet
    assert [number_of(data) for data in queue.unread()] == [2, 3, 4, 5, 6, 7]
    assert queue.uncommitted == 2 and [n for n, _ in read_all(queue)] == [2, 3, 4, 5]


def test_only_synced_entries_are_readable(tmp_path: Path) -> None:
    queue = open_queue(tmp_path)
    readable_calls = []
    queue.on_readable = lambda: readable_calls.append(queue.depth)
    queue.put_many([payload(n) for n in range(3)])
    assert queue.depth == 0 and queue.get_entry() is None, "not fsynced yet"
    job = queue.sync_job(time.monotonic(), False)
    assert job is not None
    queue.put(payload(3))  # after the snapshot: waits for the next round
    run_jobs([job])
    assert job.on_done is not None
    job.on_done()
    assert readable_calls == [3]
    assert [n for n, _ in read_all(queue)] == [0, 1, 2]
    commit_round(queue)
    assert [n for n, _ in read_all(queue)] == [3]


def test_nothing_is_synced_on_put_or_get(tmp_path: Path) -> None:
    queue = open_queue(tmp_path, sync_every=1)
    meta = tmp_path / "orders.diskqueue.meta.dat"
    before = meta.read_bytes() if meta.exists() else None
    queue.put(payload(1))
    assert (meta.read_bytes() if meta.exists() else None) == before
    commit_round(queue)
    after_put = meta.read_bytes()
    entry = queue.get_entry()
    assert entry is not None
    queue.ack(entry[1])
    assert meta.read_bytes() == after_put
    commit_round(queue)
    assert meta.read_bytes() != after_put


def test_segments_stay_until_committed_past(tmp_path: Path) -> None:
    entry_size = 4 + len(payload(0))
    queue = open_queue(tmp_path, max_bytes_per_file=entry_size * 3)
    put_synced(queue, [payload(n) for n in range(10)])  # segments 0..3
    entries = read_all(queue)
    assert len(segments(tmp_path)) == 4
    for _, token in entries[1:]:
        queue.ack(token)
    assert len(segments(tmp_path)) == 4, "entry 0 holds everything back"
    queue.ack(entries[0][1])
    assert segments(tmp_path) == ["orders.diskqueue.000003.dat"]
    assert queue.uncommitted == 0


def test_ack_all_read_then_close_leaves_a_go_readable_empty_queue(tmp_path: Path) -> None:
    queue = open_queue(tmp_path)
    put_synced(queue, [payload(n) for n in range(4)])
    read_all(queue)
    queue.put(payload(4))
    queue.ack_all_read()
    queue.close()
    meta = (tmp_path / "orders.diskqueue.meta.dat").read_text()
    depth, read, write = meta.splitlines()
    assert depth == "1" and read.split(",")[0] == write.split(",")[0]

    plain = open_queue(tmp_path, cls=DiskQueue)  # what Go's format reader sees
    assert plain.depth == 1
    data = plain.get()
    assert data is not None and number_of(data) == 4


def test_stale_and_repeated_acks_are_ignored(tmp_path: Path) -> None:
    queue = open_queue(tmp_path)
    put_synced(queue, [payload(n) for n in range(3)])
    entries = read_all(queue)
    queue.ack(entries[0][1])
    queue.ack(entries[0][1])
    queue.ack(12345)
    assert queue.uncommitted == 2
    queue.empty()
    queue.ack(entries[1][1])  # emptied: its token means nothing now
    assert queue.uncommitted == 0 and queue.depth == 0
    put_synced(queue, [payload(7)])
    assert [n for n, _ in read_all(queue)] == [7]


def test_damaged_segment_is_set_aside_only_once_committed_past(tmp_path: Path) -> None:
    entry_size = 4 + len(payload(0))
    queue = open_queue(tmp_path, max_bytes_per_file=entry_size * 2)
    queue.put_many([payload(n) for n in range(4)])  # segments 0, 1 (full) and 2 (empty, open)
    queue.close()
    first = tmp_path / "orders.diskqueue.000000.dat"
    with open(first, "r+b") as f:  # second entry's length field becomes nonsense
        f.seek(entry_size)
        f.write(b"\x7f\xff\xff\xff")

    queue = open_queue(tmp_path)
    entries = read_all(queue)
    assert [n for n, _ in entries] == [0, 2, 3]
    assert first.exists(), "entry 0 is unacknowledged: its segment must survive a crash"
    crashed_view = open_queue(tmp_path)
    assert [n for n, _ in read_all(crashed_view)] == [0, 2, 3]

    for _, token in entries:
        queue.ack(token)
    assert not first.exists()
    assert (tmp_path / "orders.diskqueue.000000.dat.bad").exists()


def test_delete_beats_a_late_metadata_write(tmp_path: Path) -> None:
    queue = open_queue(tmp_path)
    queue.put(payload(1))
    job = queue.sync_job(time.monotonic(), True)
    assert job is not None and job.write_metadata is not None
    queue.delete()
    run_jobs([job])  # the committer's thread finishing after the delete
    assert list(tmp_path.iterdir()) == []
