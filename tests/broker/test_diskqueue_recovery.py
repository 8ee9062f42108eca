"""nsqd's disk queue after crashes and on damaged data: nothing raises, good messages flow."""
from __future__ import annotations

import logging
import shutil
import struct
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nsq_protocol.message import encode_message
from nsqd.diskqueue import DiskQueue

MIN_SIZE = 26
MAX_SIZE = 1024 + 26
LOGGER = "nsqd.diskqueue"


def open_queue(path: Path, **overrides: object) -> DiskQueue:
    options: dict[str, object] = dict(
        max_bytes_per_file=1 << 20,
        min_msg_size=MIN_SIZE,
        max_msg_size=MAX_SIZE,
        sync_every=1_000_000,  # nothing synced unless a segment rolls: a crash loses metadata
        sync_timeout=3600.0,
    )
    options.update(overrides)
    return DiskQueue("orders", path, **options)  # type: ignore[arg-type]


def payload(number: int, body_size: int = 4) -> bytes:
    msg_id = f"{number:016x}".encode()
    return encode_message(msg_id, 1_600_000_000_000_000_000 + number, 1, bytes([number % 256]) * body_size)


def entry(data: bytes) -> bytes:
    return struct.pack(">i", len(data)) + data


def segment(path: Path, number: int) -> Path:
    return path / f"orders.diskqueue.{number:06d}.dat"


def write_meta(path: Path, text: str) -> None:
    (path / "orders.diskqueue.meta.dat").write_text(text)


def drain(queue: DiskQueue, limit: int = 10_000) -> list[bytes]:
    out = []
    for _ in range(limit):
        data = queue.get()
        if data is None:
            return out
        out.append(data)
    raise AssertionError(f"queue still not empty after {limit} gets")


def crash_copy(source: Path, target: Path) -> Path:
    """The data directory as the OS holds it at this instant: what survives kill -9."""
    shutil.copytree(source, target)
    return target


def warnings_naming(caplog: pytest.LogCaptureFixture, path: Path) -> list[str]:
    return [
        record.getMessage()
        for record in caplog.records
        if record.levelno == logging.WARNING and str(path) in record.getMessage()
    ]


# ---------------------------------------------------------------- crashes


def test_crash_before_any_sync_loses_nothing(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    live = tmp_path / "live"
    live.mkdir()
    messages = [payload(n) for n in range(5)]
    queue = open_queue(live)
    queue.put_many(messages[:3])
    queue.put(messages[3])
    queue.put(messages[4])
    assert not (live / "orders.diskqueue.meta.dat").exists()
    crashed = crash_copy(live, tmp_path / "crashed")
    queue.close()

    with caplog.at_level(logging.WARNING, logger=LOGGER):
        recovered = open_queue(crashed)
    assert recovered.depth == 5
    recovered.put(payload(5))  # goes to a fresh segment, never over the salvaged one
    assert drain(recovered) == messages + [payload(5)]
    assert recovered.depth == 0
    assert caplog.records  # the recovery is logged
    recovered.close()


def test_crash_after_unsynced_writes_past_metadata(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    live = tmp_path / "live"
    live.mkdir()
    messages = [payload(n) for n in range(11)]  # 34-byte entries
    queue = open_queue(live, max_bytes_per_file=100)  # two entries a segment; a roll syncs
    queue.put_many(messages[:9])  # segments 0-4, the last holding messages[8]
    assert [queue.get() for _ in range(4)] == messages[:4]  # finishing segment 1 syncs
    assert queue.get() == messages[4]  # not synced: will be delivered again
    queue.put(messages[9])  # segment 4 grows past the metadata's write position
    crashed = crash_copy(live, tmp_path / "crashed")
    queue.close()

    with caplog.at_level(logging.WARNING, logger=LOGGER):
        recovered = open_queue(crashed, max_bytes_per_file=100)
    assert recovered.depth == 6  # recounted: messages[4:10]
    assert warnings_naming(caplog, segment(crashed, 4))
    recovered.put(messages[10])
    assert segment(crashed, 4).read_bytes() == entry(messages[8]) + entry(messages[9])
    assert drain(recovered) == messages[4:]
    recovered.close()


def test_meta_claiming_more_than_the_write_segment_holds(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # power loss: metadata reached the disk, the tail of the segment did not
    messages = [payload(n) for n in range(3)]
    data = b"".join(entry(m) for m in messages)
    segment(tmp_path, 0).write_bytes(data[:-10])
    write_meta(tmp_path, f"3\n0,0\n0,{len(data)}\n")

    with caplog.at_level(logging.WARNING, logger=LOGGER):
        queue = open_queue(tmp_path)
        assert queue.depth == 2
        queue.put(payload(3))
        assert drain(queue) == messages[:2] + [payload(3)]
    assert warnings_naming(caplog, segment(tmp_path, 0))
    assert segment(tmp_path, 0).with_name(segment(tmp_path, 0).name + ".bad").exists()
    assert queue.depth == 0
    queue.close()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    puts=st.lists(st.integers(min_value=0, max_value=60), min_size=1, max_size=40),
    gets=st.integers(min_value=0, max_value=40),
    more_puts=st.integers(min_value=0, max_value=10),
    max_bytes=st.integers(min_value=40, max_value=300),
)
def test_crash_at_any_point_redelivers_at_most_what_was_read(
    puts: list[int], gets: int, more_puts: int, max_bytes: int
) -> None:
    messages = [payload(n, body_size=size) for n, size in enumerate(puts)]
    extra = [payload(1000 + n) for n in range(more_puts)]
    with tempfile.TemporaryDirectory() as directory:
        live = Path(directory) / "live"
        live.mkdir()
        queue = open_queue(live, max_bytes_per_file=max_bytes)
        queue.put_many(messages)
        read = [queue.get() for _ in range(gets)]
        consumed = sum(1 for data in read if data is not None)
        queue.put_many(extra)
        crashed = crash_copy(live, Path(directory) / "crashed")
        queue.close()

        recovered = open_queue(crashed, max_bytes_per_file=max_bytes)
        depth = recovered.depth
        delivered = drain(recovered)
        recovered.close()
    everything = messages + extra
    start = len(everything) - len(delivered)
    assert start <= consumed  # nothing unread is lost ...
    assert delivered == everything[start:]  # ... and the order holds
    assert depth == len(delivered)


# ---------------------------------------------------------------- damaged segments


def two_segments(path: Path, first: bytes, second: list[bytes], depth: int) -> None:
    segment(path, 0).write_bytes(first)
    data = b"".join(entry(m) for m in second)
    segment(path, 1).write_bytes(data)
    write_meta(path, f"{depth}\n0,0\n1,{len(data)}\n")


@pytest.mark.parametrize(
    "damage",
    [
        struct.pack(">i", MIN_SIZE - 1) + b"x" * 40,  # size below the minimum
        struct.pack(">i", MAX_SIZE + 1) + b"x" * 40,  # size above the maximum
        struct.pack(">i", -5) + b"x" * 40,  # negative size
        struct.pack(">i", 60) + b"x" * 10,  # entry cut short
        b"\x00\x00",  # header cut short
    ],
    ids=["too-small", "too-large", "negative", "truncated-entry", "truncated-header"],
)
def test_damaged_segment_is_set_aside_and_reading_goes_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, damage: bytes
) -> None:
    good_before, good_after = [payload(1), payload(2)], [payload(3), payload(4)]
    two_segments(tmp_path, b"".join(entry(m) for m in good_before) + damage, good_after, depth=5)

    with caplog.at_level(logging.WARNING, logger=LOGGER):
        queue = open_queue(tmp_path)
        assert drain(queue) == good_before + good_after
    bad = segment(tmp_path, 0)
    assert warnings_naming(caplog, bad)
    assert bad.with_name(bad.name + ".bad").exists()
    assert not bad.exists()
    assert queue.depth == 0  # corrected once the reader caught up
    queue.put(payload(5))
    assert queue.get() == payload(5)
    queue.close()


def test_damage_in_the_write_segment_moves_the_writer_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    data = entry(payload(1)) + struct.pack(">i", 3) + b"abc" + entry(payload(2))
    segment(tmp_path, 0).write_bytes(data)
    write_meta(tmp_path, f"3\n0,0\n0,{len(data)}\n")

    with caplog.at_level(logging.WARNING, logger=LOGGER):
        queue = open_queue(tmp_path)
        assert queue.get() == payload(1)
        assert queue.get() is None  # the rest of the write segment cannot be trusted
    assert warnings_naming(caplog, segment(tmp_path, 0))
    assert queue.depth == 0
    queue.put(payload(3))
    assert not segment(tmp_path, 0).exists()  # no writes into the set-aside file
    assert queue.get() == payload(3)
    queue.close()
    reopened = open_queue(tmp_path)
    assert reopened.depth == 0 and reopened.get() is None
    reopened.close()


def test_missing_segment_is_skipped(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    segment(tmp_path, 0).write_bytes(entry(payload(1)))
    # segments 1 and 2 are gone
    last = entry(payload(4))
    segment(tmp_path, 3).write_bytes(last)
    write_meta(tmp_path, f"4\n0,0\n3,{len(last)}\n")

    with caplog.at_level(logging.WARNING, logger=LOGGER):
        queue = open_queue(tmp_path)
        assert drain(queue) == [payload(1), payload(4)]
    missing_warnings = warnings_naming(caplog, segment(tmp_path, 1))
    assert len(missing_warnings) == 1  # one line for the whole gap, then straight on to segment 3
    assert str(segment(tmp_path, 3)) in missing_warnings[0]
    assert queue.depth == 0
    queue.close()


def test_missing_write_segment_at_open(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    segment(tmp_path, 0).write_bytes(entry(payload(1)))
    write_meta(tmp_path, "3\n0,0\n1,68\n")  # segment 1 vanished

    with caplog.at_level(logging.WARNING, logger=LOGGER):
        queue = open_queue(tmp_path)
        assert queue.depth == 1
        queue.put(payload(2))
        assert drain(queue) == [payload(1), payload(2)]
    assert warnings_naming(caplog, segment(tmp_path, 1))
    queue.close()


@pytest.mark.parametrize(
    "garbage",
    [b"", b"not metadata\n", b"3\n0,0\n", b"3\n0;0\n1,10\n", b"2\n1,50\n0,10\n", b"\xff\xfe\x00"],
    ids=["empty", "words", "short", "bad-separator", "reader-ahead", "binary"],
)
def test_garbage_metadata_is_set_aside_and_rebuilt_from_segments(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, garbage: bytes
) -> None:
    first, second = [payload(1), payload(2)], [payload(3)]
    two_segments(tmp_path, b"".join(entry(m) for m in first), second, depth=0)
    meta_path = tmp_path / "orders.diskqueue.meta.dat"
    meta_path.write_bytes(garbage)

    with caplog.at_level(logging.WARNING, logger=LOGGER):
        queue = open_queue(tmp_path)
    assert warnings_naming(caplog, meta_path)
    assert (tmp_path / "orders.diskqueue.meta.dat.bad").read_bytes() == garbage
    assert queue.depth == 3
    assert meta_path.read_bytes() == b"3\n0,0\n2,0\n"  # writes go after the salvaged segments
    queue.put(payload(4))
    assert drain(queue) == first + second + [payload(4)]
    queue.close()


def test_garbage_metadata_without_segments_starts_empty(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    write_meta(tmp_path, "garbage")
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        queue = open_queue(tmp_path)
    assert queue.depth == 0 and queue.get() is None
    queue.put(payload(1))
    assert queue.get() == payload(1)
    queue.close()


def test_segments_beyond_the_write_segment_are_not_overwritten(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    segment(tmp_path, 0).write_bytes(entry(payload(1)))
    segment(tmp_path, 1).write_bytes(entry(payload(2)))
    write_meta(tmp_path, f"1\n0,0\n0,{len(entry(payload(1)))}\n")  # stale: knows only segment 0

    with caplog.at_level(logging.WARNING, logger=LOGGER):
        queue = open_queue(tmp_path)
    assert queue.depth == 2
    queue.put(payload(3))
    assert segment(tmp_path, 1).read_bytes() == entry(payload(2))
    assert drain(queue) == [payload(1), payload(2), payload(3)]
    assert warnings_naming(caplog, segment(tmp_path, 1))
    queue.close()


def test_depth_too_high_in_metadata_is_corrected_when_the_reader_catches_up(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    data = entry(payload(1))
    segment(tmp_path, 0).write_bytes(data)
    write_meta(tmp_path, f"9\n0,0\n0,{len(data)}\n")
    queue = open_queue(tmp_path)
    assert queue.depth == 9
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        assert drain(queue) == [payload(1)]
    assert queue.depth == 0
    assert any("depth" in record.getMessage() for record in caplog.records)
    queue.close()


def test_depth_in_metadata_of_a_queue_read_to_the_end_is_reset(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    data = entry(payload(1))
    segment(tmp_path, 0).write_bytes(data)
    write_meta(tmp_path, f"4\n0,{len(data)}\n0,{len(data)}\n")
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        queue = open_queue(tmp_path)
    assert queue.depth == 0
    assert queue.get() is None
    queue.close()


def test_negative_depth_in_metadata_is_recounted(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    data = entry(payload(1)) + entry(payload(2))
    segment(tmp_path, 0).write_bytes(data)
    write_meta(tmp_path, f"-3\n0,0\n0,{len(data)}\n")
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        queue = open_queue(tmp_path)
    assert queue.depth == 2
    assert caplog.records
    assert drain(queue) == [payload(1), payload(2)]
    queue.close()


def test_a_reader_at_the_end_of_a_finished_segment_with_a_stale_depth_is_caught_up(tmp_path: Path) -> None:
    # metadata saved after the last entry of segment 0 was read, before the reader moved on
    # to the writer's segment, with a depth that still counts that entry
    segment(tmp_path, 0).write_bytes(entry(payload(1)))
    write_meta(tmp_path, f"1\n0,{len(entry(payload(1)))}\n1,0\n")
    queue = open_queue(tmp_path)
    assert drain(queue) == []
    assert queue.depth == 0
    queue.put(payload(2))
    assert queue.depth == 1 and queue.get() == payload(2)
    queue.close()


_segment_bytes = st.lists(
    st.one_of(
        st.builds(lambda n, size: entry(payload(n, size)), st.integers(0, 255), st.integers(0, 40)),
        st.binary(max_size=12),  # garbage between entries
    ),
    max_size=6,
).map(b"".join)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    segments=st.lists(st.one_of(st.none(), _segment_bytes), min_size=1, max_size=4),
    meta=st.one_of(
        st.none(),
        st.binary(max_size=30),
        st.tuples(
            st.integers(-2, 10),
            *[st.integers(0, 3), st.sampled_from([0, 12, 34, 68, 300])] * 2,
        ).map(lambda v: "{}\n{},{}\n{},{}\n".format(*v).encode()),
        st.tuples(st.integers(-2, 10), st.integers(0, 3), st.sampled_from([0, 34, 300])).map(
            lambda v: "{0}\n{1},{2}\n{1},{2}\n".format(*v).encode()  # reader at the writer
        ),
    ),
)
def test_any_damage_leaves_a_working_queue(segments: list[bytes | None], meta: bytes | None) -> None:
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory)
        for number, data in enumerate(segments):
            if data is not None:  # None: a missing segment
                segment(path, number).write_bytes(data)
        if meta is not None:
            (path / "orders.diskqueue.meta.dat").write_bytes(meta)
        queue = open_queue(path, max_bytes_per_file=120)
        for data in queue.get_many(3) + drain(queue):  # a run read at once, then one by one
            assert MIN_SIZE <= len(data) <= MAX_SIZE
        assert queue.depth == 0
        queue.put(payload(7))
        assert queue.depth == 1 and queue.get() == payload(7)
        queue.close()
        reopened = open_queue(path, max_bytes_per_file=120)
        assert reopened.depth == 0 and reopened.get() is None
        reopened.close()
