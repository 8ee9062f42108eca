"""nsqd's disk queue: go-diskqueue's on-disk layout byte for byte, and queue behaviour."""
from __future__ import annotations

import struct
import tempfile
import time
from collections import deque
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nsq_protocol.message import encode_message
from nsqd.diskqueue import DiskQueue, DiskQueueError

MIN_SIZE = 26  # nsqd: timestamp + attempts + id
MAX_SIZE = 1024 + 26


def open_queue(path: Path, name: str = "orders", **overrides: object) -> DiskQueue:
    options: dict[str, object] = dict(
        max_bytes_per_file=1 << 20,
        min_msg_size=MIN_SIZE,
        max_msg_size=MAX_SIZE,
        sync_every=2500,
        sync_timeout=2.0,
    )
    options.update(overrides)
    return DiskQueue(name, path, **options)  # type: ignore[arg-type]


def payload(number: int, body_size: int = 4) -> bytes:
    msg_id = f"{number:016x}".encode()
    return encode_message(msg_id, 1_600_000_000_000_000_000 + number, 1, bytes([number % 256]) * body_size)


def entry(data: bytes) -> bytes:
    return struct.pack(">i", len(data)) + data


def segment(path: Path, name: str, number: int) -> Path:
    return path / f"{name}.diskqueue.{number:06d}.dat"


def meta(path: Path, name: str = "orders") -> bytes:
    return (path / f"{name}.diskqueue.meta.dat").read_bytes()


def drain(queue: DiskQueue, limit: int = 10_000) -> list[bytes]:
    out = []
    for _ in range(limit):
        data = queue.get()
        if data is None:
            return out
        out.append(data)
    raise AssertionError(f"queue still not empty after {limit} gets")


# ---------------------------------------------------------------- byte-exact layout


def test_one_message_is_stored_as_length_then_nsq_message(tmp_path: Path) -> None:
    queue = open_queue(tmp_path)
    queue.put(encode_message(b"0123456789abcdef", 1_700_000_000_000_000_000, 1, b"hello"))
    queue.close()

    expected = bytes.fromhex(
        "0000001f"  # length 31, int32 big-endian
        "17979cfe362a0000"  # timestamp ns
        "0001"  # attempts
        "30313233343536373839616263646566"  # id
        "68656c6c6f"  # body
    )
    assert segment(tmp_path, "orders", 0).read_bytes() == expected
    assert meta(tmp_path) == b"1\n0,0\n0,35\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "orders.diskqueue.000000.dat",
        "orders.diskqueue.meta.dat",
    ]


def test_segment_and_metadata_bytes_after_puts_and_a_get(tmp_path: Path) -> None:
    messages = [payload(n, body_size=n) for n in range(3)]
    queue = open_queue(tmp_path)
    for data in messages:
        queue.put(data)
    assert queue.get() == messages[0]
    queue.close()

    assert segment(tmp_path, "orders", 0).read_bytes() == b"".join(entry(m) for m in messages)
    first, total = 4 + len(messages[0]), sum(4 + len(m) for m in messages)
    assert meta(tmp_path) == f"2\n0,{first}\n0,{total}\n".encode()


def test_channel_queue_files_are_named_topic_colon_channel(tmp_path: Path) -> None:
    queue = open_queue(tmp_path, name="orders:billing")
    queue.put(payload(1))
    queue.close()
    assert segment(tmp_path, "orders:billing", 0).exists()
    assert meta(tmp_path, "orders:billing") == f"1\n0,0\n0,{4 + len(payload(1))}\n".encode()


def test_reads_segments_written_with_another_max_bytes_per_file(tmp_path: Path) -> None:
    # As Go nsqd leaves them with --max-bytes-per-file=1000: segment 7 (5 entries, one
    # already read) is larger than our 100-byte limit; segment 8 is the write segment.
    old = [payload(n, body_size=10) for n in range(5)]  # 40-byte entries
    newer = payload(5, body_size=10)
    segment(tmp_path, "orders", 7).write_bytes(b"".join(entry(m) for m in old))
    segment(tmp_path, "orders", 8).write_bytes(entry(newer))
    (tmp_path / "orders.diskqueue.meta.dat").write_bytes(b"5\n7,40\n8,40\n")

    queue = open_queue(tmp_path, max_bytes_per_file=100)
    assert queue.depth == 5
    appended = payload(6, body_size=10)
    queue.put(appended)  # 40 + 40 <= 100: same segment, after the existing entry
    assert segment(tmp_path, "orders", 8).read_bytes() == entry(newer) + entry(appended)

    assert [queue.get() for _ in range(4)] == old[1:]
    assert not segment(tmp_path, "orders", 7).exists()
    assert drain(queue) == [newer, appended]
    assert queue.depth == 0
    queue.close()
    assert meta(tmp_path) == b"0\n8,80\n8,80\n"


# ---------------------------------------------------------------- segments


def test_rolls_when_the_next_entry_would_pass_max_bytes_per_file(tmp_path: Path) -> None:
    data = payload(1, body_size=4)  # 30 bytes, 34 with its length
    queue = open_queue(tmp_path, max_bytes_per_file=101)
    for _ in range(3):
        queue.put(data)
    assert segment(tmp_path, "orders", 0).stat().st_size == 68
    assert segment(tmp_path, "orders", 1).read_bytes() == entry(data)
    queue.close()
    assert meta(tmp_path) == b"3\n0,0\n1,34\n"


def test_an_entry_ending_exactly_at_max_bytes_per_file_stays(tmp_path: Path) -> None:
    queue = open_queue(tmp_path, max_bytes_per_file=102)
    for _ in range(3):
        queue.put(payload(1, body_size=4))
    assert segment(tmp_path, "orders", 0).stat().st_size == 102
    assert not segment(tmp_path, "orders", 1).exists()
    queue.close()


def test_an_entry_larger_than_a_segment_gets_a_segment_of_its_own(tmp_path: Path) -> None:
    small, big = payload(1), payload(2, body_size=500)
    queue = open_queue(tmp_path, max_bytes_per_file=100)
    queue.put(small)
    queue.put(big)
    queue.put(small)
    assert segment(tmp_path, "orders", 0).read_bytes() == entry(small)
    assert segment(tmp_path, "orders", 1).read_bytes() == entry(big)
    assert segment(tmp_path, "orders", 2).read_bytes() == entry(small)
    assert drain(queue) == [small, big, small]
    queue.close()


@pytest.mark.parametrize("max_bytes", [150, 1 << 20])  # batches across segments, or all in one
def test_put_many_writes_the_same_files_as_single_puts(tmp_path: Path, max_bytes: int) -> None:
    messages = [payload(n, body_size=n * 7 % 50) for n in range(25)]
    one_by_one, batched = tmp_path / "single", tmp_path / "batch"
    one_by_one.mkdir()
    batched.mkdir()
    single_queue = open_queue(one_by_one, max_bytes_per_file=max_bytes)
    for data in messages:
        single_queue.put(data)
    single_queue.close()
    batch_queue = open_queue(batched, max_bytes_per_file=max_bytes)
    batch_queue.put_many(messages[:10])
    batch_queue.put_many(messages[10:])
    assert batch_queue.depth == 25
    batch_queue.close()

    def files(path: Path) -> dict[str, bytes]:
        return {p.name: p.read_bytes() for p in path.iterdir()}

    assert files(batched) == files(one_by_one)
    assert len(files(batched)) > (3 if max_bytes == 150 else 1)  # segments plus metadata


def test_a_segment_is_deleted_once_its_last_entry_is_read(tmp_path: Path) -> None:
    queue = open_queue(tmp_path, max_bytes_per_file=70)
    messages = [payload(n) for n in range(4)]  # 34-byte entries: two per segment
    queue.put_many(messages)
    assert queue.get() == messages[0]
    assert segment(tmp_path, "orders", 0).exists()
    assert queue.get() == messages[1]
    assert not segment(tmp_path, "orders", 0).exists()
    assert segment(tmp_path, "orders", 1).exists()
    assert drain(queue) == messages[2:]
    assert segment(tmp_path, "orders", 1).exists()  # still the write segment
    queue.close()


def test_reopen_after_close_keeps_order_and_depth(tmp_path: Path) -> None:
    messages = [payload(n, body_size=n) for n in range(40)]
    queue = open_queue(tmp_path, max_bytes_per_file=200)
    queue.put_many(messages[:30])
    assert [queue.get() for _ in range(5)] == messages[:5]
    queue.close()

    queue = open_queue(tmp_path, max_bytes_per_file=200)
    assert queue.depth == 25
    queue.put_many(messages[30:])
    assert queue.depth == 35
    assert drain(queue) == messages[5:]
    assert queue.depth == 0
    queue.close()


def test_get_on_an_empty_queue_returns_none(tmp_path: Path) -> None:
    queue = open_queue(tmp_path)
    assert queue.get() is None
    queue.put(payload(1))
    assert queue.get() == payload(1)
    assert queue.get() is None
    assert queue.depth == 0
    queue.close()


# ---------------------------------------------------------------- empty, delete, close


def test_empty_drops_every_message_and_segment(tmp_path: Path) -> None:
    queue = open_queue(tmp_path, max_bytes_per_file=100)
    queue.put_many([payload(n) for n in range(10)])
    queue.get()
    queue.empty()
    assert queue.depth == 0
    assert queue.get() is None
    assert list(tmp_path.glob("*.diskqueue.*.dat")) == [tmp_path / "orders.diskqueue.meta.dat"]
    depth, read, write = meta(tmp_path).decode().splitlines()
    assert depth == "0" and read == write

    queue.put(payload(99))
    queue.close()
    queue = open_queue(tmp_path, max_bytes_per_file=100)
    assert drain(queue) == [payload(99)]
    queue.close()


def test_delete_removes_only_this_queues_files(tmp_path: Path) -> None:
    names = ["orders", "orders:billing", "orders.x"]
    queues = {name: open_queue(tmp_path, name=name, max_bytes_per_file=100) for name in names}
    for queue in queues.values():
        queue.put_many([payload(n) for n in range(5)])
        queue.sync()
    (tmp_path / "orders.diskqueue.000000.dat.bad").write_bytes(b"set aside earlier")

    queues["orders"].delete()
    left = sorted(p.name for p in tmp_path.iterdir())
    assert not [name for name in left if name.startswith("orders.diskqueue.")]
    assert "orders:billing.diskqueue.meta.dat" in left
    assert "orders.x.diskqueue.000000.dat" in left
    for name in names[1:]:
        assert drain(queues[name]) == [payload(n) for n in range(5)]
        queues[name].close()


def test_put_rejects_payloads_outside_the_size_bounds(tmp_path: Path) -> None:
    queue = open_queue(tmp_path)
    with pytest.raises(DiskQueueError, match="invalid message write size"):
        queue.put(b"x" * (MIN_SIZE - 1))
    with pytest.raises(DiskQueueError, match="invalid message write size"):
        queue.put(b"x" * (MAX_SIZE + 1))
    with pytest.raises(DiskQueueError):
        queue.put_many([payload(1), b"short"])  # checked before anything is written
    assert queue.depth == 0
    queue.put(b"x" * MIN_SIZE)
    queue.put(b"y" * MAX_SIZE)
    assert drain(queue) == [b"x" * MIN_SIZE, b"y" * MAX_SIZE]
    queue.close()


def test_a_closed_queue_refuses_work_and_close_is_idempotent(tmp_path: Path) -> None:
    queue = open_queue(tmp_path)
    queue.put(payload(1))
    queue.close()
    queue.close()
    for operation in (lambda: queue.put(payload(2)), queue.get, queue.sync, queue.empty):
        with pytest.raises(DiskQueueError, match="closed"):
            operation()
    reopened = open_queue(tmp_path)
    assert reopened.get() == payload(1)
    reopened.close()


def test_missing_data_directory_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(DiskQueueError, match="not a directory"):
        open_queue(tmp_path / "absent")


# ---------------------------------------------------------------- syncing


@pytest.mark.parametrize("sync_every", [0, 1])
def test_sync_every_zero_or_one_persists_metadata_after_each_operation(
    tmp_path: Path, sync_every: int
) -> None:
    queue = open_queue(tmp_path, sync_every=sync_every)
    queue.put(payload(1))
    assert meta(tmp_path) == f"1\n0,0\n0,{4 + len(payload(1))}\n".encode()
    queue.get()
    end = 4 + len(payload(1))
    assert meta(tmp_path) == f"0\n0,{end}\n0,{end}\n".encode()
    queue.close()


def test_sync_every_counts_puts_and_gets_together(tmp_path: Path) -> None:
    queue = open_queue(tmp_path, sync_every=3)
    queue.put(payload(1))
    queue.put(payload(2))
    assert not (tmp_path / "orders.diskqueue.meta.dat").exists()
    queue.get()
    end = 2 * (4 + len(payload(1)))
    assert meta(tmp_path) == f"1\n0,{end // 2}\n0,{end}\n".encode()
    queue.close()


def test_sync_if_due_waits_for_sync_timeout(tmp_path: Path) -> None:
    queue = open_queue(tmp_path, sync_every=10_000, sync_timeout=30.0)
    queue.sync_if_due(time.monotonic() + 30.0)
    assert not (tmp_path / "orders.diskqueue.meta.dat").exists()  # nothing changed: no disk write
    queue.put(payload(1))
    queue.sync_if_due(time.monotonic())
    assert not (tmp_path / "orders.diskqueue.meta.dat").exists()
    queue.sync_if_due(time.monotonic() + 30.0)
    assert meta(tmp_path) == f"1\n0,0\n0,{4 + len(payload(1))}\n".encode()
    queue.close()


def test_get_many_reads_across_chunks_and_segments_in_order(tmp_path: Path) -> None:
    queue = open_queue(tmp_path, max_bytes_per_file=2000)
    messages = [payload(n, body_size=n % 90) for n in range(300)]
    queue.put_many(messages)
    got: list[bytes] = []
    while batch := queue.get_many(37):
        got += batch
    assert got == messages and queue.depth == 0
    assert len(list(tmp_path.glob("orders.diskqueue.0*.dat"))) <= 1  # read segments deleted
    queue.close()


def test_explicit_sync_persists_metadata(tmp_path: Path) -> None:
    queue = open_queue(tmp_path, sync_every=10_000, sync_timeout=30.0)
    queue.put_many([payload(1), payload(2)])
    queue.sync()
    assert meta(tmp_path).startswith(b"2\n0,0\n0,")
    queue.close()


# ---------------------------------------------------------------- property


_operations = st.lists(
    st.one_of(
        st.tuples(st.just("put"), st.binary(min_size=MIN_SIZE, max_size=90)),
        st.tuples(st.just("put_many"), st.lists(st.binary(min_size=MIN_SIZE, max_size=60), max_size=6)),
        st.tuples(st.just("get"), st.none()),
        st.tuples(st.just("get_many"), st.integers(min_value=1, max_value=8)),
        st.tuples(st.just("reopen"), st.integers(min_value=30, max_value=400)),
    ),
    max_size=60,
)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(operations=_operations, max_bytes=st.integers(min_value=30, max_value=400))
def test_any_interleaving_keeps_fifo_order_and_depth(
    operations: list[tuple[str, object]], max_bytes: int
) -> None:
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory)
        queue = open_queue(path, max_bytes_per_file=max_bytes)
        model: deque[bytes] = deque()
        try:
            for operation, argument in operations:
                if operation == "put":
                    assert isinstance(argument, bytes)
                    queue.put(argument)
                    model.append(argument)
                elif operation == "put_many":
                    assert isinstance(argument, list)
                    queue.put_many(argument)
                    model.extend(argument)
                elif operation == "get":
                    assert queue.get() == (model.popleft() if model else None)
                elif operation == "get_many":
                    assert isinstance(argument, int)
                    want = [model.popleft() for _ in range(min(argument, len(model)))]
                    assert queue.get_many(argument) == want
                else:
                    queue.close()
                    # the reopened queue may use another segment size: old segments still read
                    assert isinstance(argument, int)
                    queue = open_queue(path, max_bytes_per_file=argument)
                assert queue.depth == len(model)
                assert list(queue.unread()) == list(model)  # and reading it back moves nothing
            assert drain(queue) == list(model)
            assert queue.depth == 0
            assert len(list(path.glob("orders.diskqueue.0*.dat"))) <= 1  # read segments deleted
        finally:
            queue.close()
