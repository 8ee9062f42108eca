"""The deferral sidecar: due times of deferred messages, beside a queue's files."""
from __future__ import annotations

import logging
import os
import time
from pathlib import Path

import pytest

from nsqd.deferrals import COMPACT_SLACK, DeferralStore, deferrals_path

ID_A = b"0000000000000a01"
ID_B = b"0000000000000b02"


def store(tmp_path: Path, journaled: bool) -> DeferralStore:
    return DeferralStore(deferrals_path(tmp_path, "orders:archive"), journaled=journaled)


def test_default_mode_writes_at_close_and_reads_at_open(tmp_path: Path) -> None:
    deferrals = store(tmp_path, journaled=False)
    deferrals.record(ID_A, time.time() + 30)
    deferrals.record(ID_B, time.time() - 1)  # already due: not worth keeping
    path = tmp_path / "orders:archive.diskqueue.deferred.dat"
    assert not path.exists(), "default mode writes nothing before shutdown"
    deferrals.close()
    assert path.read_text().splitlines() == [f"{ID_A.hex()} {path.read_text().split()[1]}"]

    reopened = store(tmp_path, journaled=False)
    assert 29 < reopened.remaining(ID_A) <= 30
    assert reopened.remaining(ID_B) == 0.0


def test_nothing_ahead_leaves_no_file(tmp_path: Path) -> None:
    deferrals = store(tmp_path, journaled=False)
    deferrals.record(ID_A, time.time() + 30)
    deferrals.close()
    reopened = store(tmp_path, journaled=False)
    reopened.forget(ID_A)
    reopened.close()
    assert list(tmp_path.iterdir()) == []


def test_journal_survives_a_crash(tmp_path: Path) -> None:
    deferrals = store(tmp_path, journaled=True)
    deferrals.record(ID_A, time.time() + 30)
    deferrals.record(ID_A, time.time() + 60)  # a later record wins
    job = deferrals.sync_job(time.monotonic(), False)
    assert job is not None and job.data_fds and job.directories
    for fd in job.data_fds:
        os.close(fd)
    # no close(): the process died
    reopened = store(tmp_path, journaled=True)
    assert 59 < reopened.remaining(ID_A) <= 60


def test_journal_is_compacted(tmp_path: Path) -> None:
    deferrals = store(tmp_path, journaled=True)
    for i in range(3 * COMPACT_SLACK):
        deferrals.record(ID_A, time.time() + 30 + i)
    path = tmp_path / "orders:archive.diskqueue.deferred.dat"
    assert len(path.read_text().splitlines()) <= COMPACT_SLACK + 3
    assert store(tmp_path, journaled=True).remaining(ID_A) > 30 + 3 * COMPACT_SLACK - 2


def test_unreadable_lines_are_skipped_with_a_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    due = int((time.time() + 30) * 1000)
    path = tmp_path / "orders:archive.diskqueue.deferred.dat"
    path.write_text(f"garbage\n{ID_A.hex()} {due}\nzz 12\n")
    with caplog.at_level(logging.WARNING):
        deferrals = store(tmp_path, journaled=False)
    assert deferrals.remaining(ID_A) > 29
    assert "skipped 2 unreadable line(s)" in caplog.text


def test_delete_removes_the_file(tmp_path: Path) -> None:
    deferrals = store(tmp_path, journaled=True)
    deferrals.record(ID_A, time.time() + 30)
    deferrals.delete()
    assert list(tmp_path.iterdir()) == []
