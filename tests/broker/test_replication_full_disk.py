"""A backup's log on a disk that fills up, a real tmpfs of a few KiB (root: mount): the
write that fails, the first of it a short write, is not acknowledged and leaves the log
whole (what part of it reached the disk is cut off again); once there is room again the
frames held back are written, so a restart replays every one of them."""
from __future__ import annotations

import asyncio
import errno
import os
import subprocess
from pathlib import Path
from typing import Iterator

import pytest

from nsqd.message import encode_payload
from nsqd.replication import wire
from nsqd.replication.store import ReplicaStore
from nsqd.replication.wire import Entry
from nsqd.write_all import append_whole

OWNER = "127.0.0.2:4153"


@pytest.fixture
def tiny_disk(tmp_path: Path) -> Iterator[Path]:
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=32k", "tmpfs", str(disk)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=True)


def grow(disk: Path) -> None:
    subprocess.run(["mount", "-o", "remount,size=1m", str(disk)], check=True)


def test_an_append_that_does_not_fit_leaves_the_file_as_it_was(tiny_disk: Path) -> None:
    path = tiny_disk / "log"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        append_whole(fd, b"a" * 20_000)
        with pytest.raises(OSError) as failed:
            append_whole(fd, b"b" * 20_000)  # about 12 KiB fit: os.write takes them and says so
        assert failed.value.errno == errno.ENOSPC
        assert path.read_bytes() == b"a" * 20_000
        grow(tiny_disk)
        append_whole(fd, b"c" * 20_000)
        assert path.read_bytes() == b"a" * 20_000 + b"c" * 20_000
    finally:
        os.close(fd)


def frame(seq: int) -> bytes:
    return wire.append(seq, "t", [Entry(encode_payload(b"%016x" % seq, b"x" * 2000, 0))])


async def one_turn() -> None:
    """The commit ``after_commit`` scheduled (call_soon) runs before this returns."""
    await asyncio.sleep(0)


async def test_a_full_disk_holds_back_the_acks_and_room_again_writes_every_frame(tiny_disk: Path) -> None:
    store = ReplicaStore(str(tiny_disk), durable=False)
    acked: list[int] = []
    seq = 0
    while seq < 100 and len(acked) == seq:
        seq += 1
        raw = frame(seq)
        [(decoded, _)] = wire.raw_frames(raw)
        store.apply(OWNER, decoded, raw)
        store.after_commit(lambda s=seq: acked.append(s))
        await one_turn()
    assert len(acked) == seq - 1, "the disk never filled"
    full_at = seq
    log = tiny_disk / "replication" / "127.0.0.2_4153.log"
    data = log.read_bytes()
    assert sum(len(raw) for _, raw in wire.raw_frames(data)) == len(data), "a torn frame in the log"

    grow(tiny_disk)
    for seq in range(full_at + 1, full_at + 4):
        raw = frame(seq)
        [(decoded, _)] = wire.raw_frames(raw)
        store.apply(OWNER, decoded, raw)
    store.after_commit(lambda: acked.append(full_at + 3))
    await one_turn()
    assert acked[-1] == full_at + 3  # cumulative: the frames held back are acknowledged with it
    store.close()

    again = ReplicaStore(str(tiny_disk), durable=False)
    again.load()
    assert sorted(again.shards[OWNER]["t"].messages) == [b"%016x" % n for n in range(1, full_at + 4)]
    again.close()
