"""When deferred messages are due, kept beside a queue's disk files.

NSQ's message layout, which the disk queue stores, has no field for a delay: a deferred
message written to disk would come back at the next start as if it had never been
deferred. This sidecar, ``<queue>.diskqueue.deferred.dat``, records the due times:

    <message id, hex> <due time, unix milliseconds>\\n

one line per record, a later line for the same ID winning. When a message read back from
the disk queue has a due time still ahead, it waits in the deferred queue first. Go nsqd
does not know the file and delivers such messages at once (its own behaviour).

Default mode keeps the records in memory and writes the file at shutdown (atomically).
Durable mode appends every record as it is made (a journal the group committer fsyncs
with the queue's data) and compacts the file when most of its lines are stale.
"""
from __future__ import annotations

import logging
import os
import random
import time
from pathlib import Path

from .group_commit import SyncJob
from .write_all import append_whole, write_all

COMPACT_SLACK = 1024  # stale lines tolerated before the journal is rewritten


def deferrals_path(data_path: str | os.PathLike[str], queue_name: str) -> Path:
    return Path(data_path) / f"{queue_name}.diskqueue.deferred.dat"


class DeferralStore:
    def __init__(self, path: Path, *, journaled: bool, logger: logging.Logger | None = None,
                 file_exists: bool | None = None) -> None:
        """``file_exists``: whether the sidecar is there, when the caller knows (saves a
        look per queue); None: look."""
        self._path = path
        self._journaled = journaled
        self._log = logger or logging.getLogger(__name__)
        self._due_ms: dict[bytes, int] = {}
        self._fd: int | None = None
        self._lines = 0
        self._unsynced = False
        self._new_file = False
        self._closed = False
        self._file_may_exist = file_exists is not False
        if self._file_may_exist:
            self._load()
        if journaled:
            self._rewrite()

    def __len__(self) -> int:
        return len(self._due_ms)

    def remaining(self, msg_id: bytes) -> float:
        """Seconds until ``msg_id`` is due; 0.0 when it is not deferred (any more)."""
        if not self._due_ms:
            return 0.0
        due_ms = self._due_ms.get(msg_id)
        if due_ms is None:
            return 0.0
        left = due_ms / 1000 - time.time()
        if left <= 0:
            del self._due_ms[msg_id]
            return 0.0
        return left

    def record(self, msg_id: bytes, due: float) -> None:
        """``msg_id`` is due at ``due`` (unix seconds)."""
        due_ms = int(due * 1000)
        self._due_ms[msg_id] = due_ms
        if self._journaled and not self._closed:
            self._append(f"{msg_id.hex()} {due_ms}\n".encode("ascii"))

    def forget(self, msg_id: bytes) -> None:
        if self._due_ms:
            self._due_ms.pop(msg_id, None)

    def clear(self) -> None:
        self._due_ms.clear()
        if self._journaled and not self._closed:
            self._compact()

    def close(self) -> None:
        """Write what is still ahead (or remove the file when nothing is) and stop."""
        if self._closed:
            return
        self._closed = True
        self._close_journal()
        self._rewrite()

    def delete(self) -> None:
        self._closed = True
        self._close_journal()
        self._due_ms.clear()
        try:
            self._path.unlink(missing_ok=True)
        except OSError as error:
            self._log.error("DEFERRALS: cannot remove %s: %s", self._path, error)

    def sync_job(self, now: float, force_metadata: bool) -> SyncJob | None:
        if not self._unsynced or self._fd is None:
            return None
        self._unsynced = False
        job = SyncJob(data_fds=[os.dup(self._fd)])
        if self._new_file:
            job.directories.append(str(self._path.parent))
            self._new_file = False
        return job

    # ---------------------------------------------------------------- files

    def _load(self) -> None:
        try:
            with open(self._path, "rb") as f:
                raw = f.read()
        except FileNotFoundError:
            return
        except OSError as error:
            self._log.error("DEFERRALS: cannot read %s: %s; deferred messages will be delivered at once",
                            self._path, error)
            return
        bad = 0
        for line in raw.split(b"\n"):
            if not line:
                continue
            try:
                hex_id, due = line.split(b" ")
                self._due_ms[bytes.fromhex(hex_id.decode("ascii"))] = int(due)
            except ValueError:
                bad += 1
        if bad:
            self._log.warning("DEFERRALS: skipped %d unreadable line(s) in %s", bad, self._path)
        self._drop_expired()

    def _drop_expired(self) -> None:
        now_ms = time.time() * 1000
        self._due_ms = {msg_id: due for msg_id, due in self._due_ms.items() if due > now_ms}

    def _rewrite(self) -> None:
        """Replace the file with the records still ahead (temp file, fsync, rename)."""
        self._drop_expired()
        self._lines = len(self._due_ms)
        try:
            if not self._due_ms:
                if self._file_may_exist and self._path.exists():
                    self._path.unlink()
                    self._sync_directory()
                self._file_may_exist = False
                return
            data = "".join(f"{msg_id.hex()} {due}\n" for msg_id, due in self._due_ms.items()).encode("ascii")
            temp = self._path.with_name(f"{self._path.name}.{random.getrandbits(62)}.tmp")
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            try:
                write_all(fd, data)
                os.fsync(fd)
            except OSError:
                os.close(fd)
                temp.unlink(missing_ok=True)
                raise
            os.close(fd)
            os.replace(temp, self._path)
            self._file_may_exist = True
            self._sync_directory()
        except OSError as error:
            self._log.error("DEFERRALS: cannot write %s: %s", self._path, error)

    def _sync_directory(self) -> None:
        dir_fd = os.open(self._path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)

    def _open_journal(self) -> None:
        self._new_file = not self._path.exists()
        self._file_may_exist = True
        self._fd = os.open(self._path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)

    def _close_journal(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)

    def _append(self, line: bytes) -> None:
        try:
            if self._fd is None:
                self._open_journal()
                assert self._fd is not None
            append_whole(self._fd, line)
        except OSError as error:
            self._log.error("DEFERRALS: cannot append to %s: %s", self._path, error)
            return
        self._unsynced = True
        self._lines += 1
        if self._lines > COMPACT_SLACK + 2 * len(self._due_ms):
            self._compact()

    def _compact(self) -> None:
        """Rewrite the journal with the live records; the next record reopens it."""
        self._close_journal()
        self._rewrite()
        self._unsynced = False  # the rewrite was fsynced
