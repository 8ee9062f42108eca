"""The disk queue of durable mode (--sync-before-ack): a message leaves the disk only once
it is acknowledged.

Same files and format as ``DiskQueue``. Reading hands out a token with each payload;
``ack(token)`` says the message is done with (FINed by a consumer, or copied into durable
channel queues by its topic). Two cursors:

* the read cursor, where the next ``get`` reads (kept in memory only);
* the commit cursor, the start of the oldest entry read but not acknowledged (the read
  cursor when there is none). It is the read position written to the metadata file, so
  after a crash everything from there is read again; acknowledged entries that sat behind
  an unacknowledged one come back too (duplicates, never losses). Segments are removed,
  and damaged ones set aside, only once the commit cursor has left them. Only the
  unacknowledged entries are remembered, so memory follows what the owner holds.

Nothing is fsynced on the event loop as a side effect of put or get: the group committer
collects a ``sync_job`` and fsyncs in a worker thread, data before metadata. Metadata is
rewritten at most every ``METADATA_INTERVAL`` unless forced; data appended past the
metadata's write position is found again at open (the base class's recovery reads
segments to their end).

Only what a finished round made durable can be read (and counts in ``depth``): a consumer
never sees a message its publisher has not been told OK about, so a client that publishes
and consumes on one connection gets the OK first, as with NSQ. ``on_readable`` is called
when a round made more of the queue readable.
"""
from __future__ import annotations

import functools
import os
import threading
from collections import OrderedDict
from typing import Any, Callable

from .diskqueue import DiskQueue, _Metadata, write_metadata_file
from .group_commit import SyncJob

METADATA_INTERVAL = 0.1  # seconds: how stale the commit cursor on disk may get
_NEVER_AGAIN = 1 << 62  # metadata generation of a deleted queue: nothing may rewrite it


class DurableDiskQueue(DiskQueue):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # token -> (file, pos) where the entry starts, for entries read and not yet
        # acknowledged, oldest first: the first one is the commit cursor
        self._unacked: OrderedDict[int, tuple[int, int]] = OrderedDict()
        self._next_token = 0
        self._last_token = -1
        self._kept_from_file = 0  # segments before this one are gone
        self._damaged: set[int] = set()  # segments to set aside once committed past
        self._unsynced_data = False
        self._entries_unsynced = 0  # appended since the last snapshot
        self._entries_syncing = 0  # appended before it, round not finished yet
        self._synced_file = 0  # readable limit, with _synced_pos: the last round's snapshot
        self._synced_pos = 0
        self.on_readable: Callable[[], None] | None = None
        self._new_files = False
        self._metadata_dirty = False
        self._metadata_lock = threading.Lock()  # the committer's thread writes metadata too
        self._metadata_generation = 0
        self._metadata_written_generation = 0
        self._metadata_written_at = 0.0
        super().__init__(*args, **kwargs)
        self._synced_file, self._synced_pos = self._write_file, self._write_pos  # all found was synced
        self._kept_from_file = self._read_file

    @property
    def depth(self) -> int:
        """Unread messages that are durable (never 0 while one can be read)."""
        if self._nothing_to_read():
            return 0
        return max(1, self._depth - self._entries_unsynced - self._entries_syncing)

    # ---------------------------------------------------------------- reading and acks

    def get_entry(self) -> tuple[bytes, int] | None:
        """The next payload and its token, or None when nothing is left to read."""
        data = self.get()
        if data is None:
            return None
        return data, self._last_token

    def ack(self, token: int) -> None:
        """The entry read with ``token`` is done with. Unknown or repeated tokens are ignored."""
        unacked = self._unacked
        if token not in unacked:
            return
        oldest = next(iter(unacked)) == token
        del unacked[token]
        if oldest:
            self._commit_moved()

    def ack_all_read(self) -> None:
        """Everything read so far is done with (its owner wrote what it still holds back)."""
        self._unacked.clear()
        self._commit_moved()

    @property
    def uncommitted(self) -> int:
        """Messages read but still behind the commit cursor (a crash brings them back)."""
        if not self._unacked:
            return 0
        return self._next_token - next(iter(self._unacked))

    def _commit_position(self) -> tuple[int, int]:
        if self._unacked:
            return next(iter(self._unacked.values()))
        return self._read_file, self._read_pos

    def _entry_consumed(self, start_pos: int) -> None:
        token = self._next_token
        self._next_token += 1
        self._unacked[token] = (self._read_file, start_pos)
        self._last_token = token

    def _commit_moved(self) -> None:
        self._metadata_dirty = True
        commit_file = self._commit_position()[0]
        if commit_file <= self._kept_from_file:
            return
        for number in range(self._kept_from_file, commit_file):
            if number in self._damaged:
                self._damaged.discard(number)
                self._rename(self._segment_path(number), self._set_aside_path(number))
            else:
                self._remove(self._segment_path(number))
        self._kept_from_file = commit_file

    # ---------------------------------------------------------------- base class hooks

    def _finish_read_segment(self) -> None:
        self._close_reader()
        self._read_file += 1
        self._read_pos = 0
        self._commit_moved()

    def _leave_damaged_segment(self, bad_file: int, next_file: int, *, set_aside: bool) -> None:
        # entries read from it may still be unacknowledged: it must survive another crash
        if set_aside:
            self._damaged.add(bad_file)

    def _skip_damaged_segment(self, damage: Any) -> None:
        super()._skip_damaged_segment(damage)
        self._commit_moved()

    def _readable_limit(self) -> tuple[int, int]:
        if self._synced_file == self._write_file:
            return self._write_file, self._synced_pos
        return self._write_file, 0  # rolled since: older segments were fsynced, this one not yet

    def _runs_allowed(self) -> bool:
        return False  # every entry read gets its token

    def _nothing_to_read(self) -> bool:
        return (self._read_file, self._read_pos) >= self._readable_limit()

    def _read_end(self, reader: Any) -> int:
        if self._read_file == self._write_file:
            return self._readable_limit()[1]
        return super()._read_end(reader)

    def _writer(self) -> int:
        if self._writer_fd is None:
            self._new_files = True  # its directory entry must be durable too
        return super()._writer()

    def _append(self, parts: list[bytes], total: int) -> None:
        super()._append(parts, total)
        self._entries_unsynced += len(parts) // 2
        self._unsynced_data = True
        self._metadata_dirty = True

    def _after_ops(self, count: int, *, raise_errors: bool) -> None:
        return None  # the group committer syncs

    def _sync(self) -> None:
        self._metadata_dirty = True  # the group committer writes it, after the data

    def _current_metadata(self) -> _Metadata:
        if not self._unacked:
            return super()._current_metadata()
        commit_file, commit_pos = self._commit_position()
        return _Metadata(self._depth + self.uncommitted, commit_file, commit_pos, self._write_file, self._write_pos)

    def _persist_metadata(self) -> None:
        self._metadata_generation += 1
        self._write_metadata(self._current_metadata().encode(), self._metadata_generation)
        self._metadata_dirty = False

    def _write_metadata(self, encoded: bytes, generation: int) -> None:
        """Write unless a newer snapshot is already on disk (loop and worker both write)."""
        with self._metadata_lock:
            if generation <= self._metadata_written_generation:
                return
            write_metadata_file(self._meta_path(), encoded)
            self._metadata_written_generation = generation

    # ---------------------------------------------------------------- group commit

    def sync_job(self, now: float, force_metadata: bool) -> SyncJob | None:
        if self._closed:
            return None
        job = SyncJob()
        if self._unsynced_data:
            if self._writer_fd is not None:
                job.data_fds.append(os.dup(self._writer_fd))
            count = self._entries_unsynced
            self._entries_syncing += count
            self._entries_unsynced = 0
            self._unsynced_data = False
            job.on_done = functools.partial(self._synced, self._write_file, self._write_pos, count)
            job.on_failed = functools.partial(self._sync_failed, count)
        if self._new_files:
            job.directories.append(str(self._dir))
            self._new_files = False
        if self._metadata_dirty and (force_metadata or now - self._metadata_written_at >= METADATA_INTERVAL):
            self._metadata_generation += 1
            job.write_metadata = functools.partial(
                self._write_metadata, self._current_metadata().encode(), self._metadata_generation)
            self._metadata_dirty = False
            self._metadata_written_at = now
        if not (job.data_fds or job.directories or job.write_metadata):
            return None
        return job

    def _synced(self, file_num: int, pos: int, count: int) -> None:
        self._entries_syncing = max(0, self._entries_syncing - count)
        if (file_num, pos) > (self._synced_file, self._synced_pos):
            self._synced_file, self._synced_pos = file_num, pos
        if self.on_readable is not None and not self._closed:
            self.on_readable()

    def _sync_failed(self, count: int) -> None:
        self._entries_syncing = max(0, self._entries_syncing - count)
        self._entries_unsynced += count
        self._unsynced_data = True  # the next round tries again
        self._metadata_dirty = True

    # ---------------------------------------------------------------- lifecycle

    def empty(self) -> None:
        self._unacked.clear()
        self._damaged.clear()
        self._entries_unsynced = 0
        super().empty()
        self._kept_from_file = self._read_file

    def delete(self) -> None:
        with self._metadata_lock:
            self._metadata_written_generation = _NEVER_AGAIN
        super().delete()
