"""The overflow store behind every topic and channel, in go-diskqueue's on-disk format.

Files in the data directory, for a queue called ``name`` (a topic's name, or
``<topic>:<channel>`` for a channel):

* ``<name>.diskqueue.NNNNNN.dat``: segments, each a run of ``[length:int32 BE][payload]``
  entries. A segment is written up to ``max_bytes_per_file``; an entry never spans two.
* ``<name>.diskqueue.meta.dat``: ``"<depth>\\n<read file>,<read pos>\\n<write file>,<write pos>\\n"``,
  replaced atomically (temporary file, fsync, rename).

A data directory written by Go nsqd opens here unchanged, and the other way round.
Damage never stops the queue: a segment that cannot be read is renamed ``<file>.bad``
(with a WARNING naming it) and reading goes on with the next one.

Not thread-safe: the owner calls every method from one thread (nsqd's event loop).
"""
from __future__ import annotations

import logging
import os
import random
import re
import struct
import time
from collections.abc import Generator, Iterator, Sequence
from dataclasses import dataclass
from itertools import chain
from pathlib import Path

_ENTRY_LENGTH = struct.Struct(">i")
_READ_CHUNK = 1 << 20  # bytes read from a segment at a time
_META_FORMAT = "{depth}\n{read_file},{read_pos}\n{write_file},{write_pos}\n"
# Go reads the metadata with Fscanf("%d\n%d,%d\n%d,%d\n"): signed decimal integers.
_META_PATTERN = re.compile(rb"([+-]?\d+)\n([+-]?\d+),([+-]?\d+)\n([+-]?\d+),([+-]?\d+)\n?\s*")


class DiskQueueError(Exception):
    """A put, sync or close that could not be done (bad size, I/O error, queue closed)."""


def write_metadata_file(path: Path, encoded: bytes) -> None:
    """Replace ``path`` atomically: temporary file, fsync, rename."""
    temp = path.with_name(f"{path.name}.{random.getrandbits(62)}.tmp")
    try:
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            if os.write(fd, encoded) != len(encoded):
                raise OSError(f"short write to {temp}")
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temp, path)
    except OSError as error:
        try:
            temp.unlink(missing_ok=True)
        except OSError:
            pass
        raise DiskQueueError(f"persisting metadata {path} failed: {error}") from error


def _read_small_file(path: str) -> bytes:
    """The whole of a file of a few hundred bytes at most (cheaper than pathlib's read)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        parts = []
        while chunk := os.read(fd, 4096):
            parts.append(chunk)
        return b"".join(parts)
    finally:
        os.close(fd)


def _segment_file(directory: Path, name: str, file_num: int) -> Path:
    return directory / f"{name}.diskqueue.{file_num:06d}.dat"


def _meta_file(directory: Path, name: str) -> Path:
    return directory / f"{name}.diskqueue.meta.dat"


# compiled when a queue lists the directory (rarely), not for each queue opened
def _segment_pattern(name: str) -> re.Pattern[str]:
    return re.compile(re.escape(name) + r"\.diskqueue\.([0-9]{6,})\.dat")


def _own_file_pattern(name: str) -> re.Pattern[str]:
    return re.compile(re.escape(name) + r"\.diskqueue\.([0-9]{6,}\.dat(\.bad)?|meta\.dat(\.bad|\.[0-9]+\.tmp)?)")


@dataclass(frozen=True, slots=True)
class _Metadata:
    depth: int
    read_file: int
    read_pos: int
    write_file: int
    write_pos: int

    def encode(self) -> bytes:
        return _META_FORMAT.format(
            depth=self.depth,
            read_file=self.read_file,
            read_pos=self.read_pos,
            write_file=self.write_file,
            write_pos=self.write_pos,
        ).encode("ascii")

    @classmethod
    def decode(cls, raw: bytes) -> _Metadata | None:
        """The metadata in ``raw``, or None when it is not a metadata file we can trust."""
        match = _META_PATTERN.fullmatch(raw)
        if match is None:
            return None
        meta = cls(*(int(group) for group in match.groups()))
        positions = (meta.read_file, meta.read_pos, meta.write_file, meta.write_pos)
        if min(positions) < 0:
            return None
        if (meta.read_file, meta.read_pos) > (meta.write_file, meta.write_pos):
            return None  # a reader ahead of the writer: the file does not describe this data
        return meta


class _CorruptSegment(Exception):
    """The read segment cannot yield its next entry; ``missing`` when the file is absent."""

    def __init__(self, reason: str, *, missing: bool = False) -> None:
        super().__init__(reason)
        self.missing = missing


class _SegmentReader:
    """Positioned reads from one segment, served from a large in-memory chunk."""

    def __init__(self, path: Path) -> None:
        self._fd = os.open(path, os.O_RDONLY)
        self._chunk = b""
        self._chunk_start = 0

    def size(self) -> int:
        return os.fstat(self._fd).st_size

    def read(self, pos: int, count: int, end: int) -> bytes | None:
        """``count`` bytes at ``pos``, all before ``end``; None if the file holds fewer."""
        if pos + count > end:
            return None
        offset = pos - self._chunk_start
        if offset >= 0 and offset + count <= len(self._chunk):
            return self._chunk[offset : offset + count]
        want = min(max(count, _READ_CHUNK), end - pos)
        parts: list[bytes] = []
        got = 0
        while got < want:
            part = os.pread(self._fd, want - got, pos + got)
            if not part:
                break
            parts.append(part)
            got += len(part)
        self._chunk = parts[0] if len(parts) == 1 else b"".join(parts)
        self._chunk_start = pos
        if got < count:
            return None
        return self._chunk[:count]

    def release_chunk(self) -> None:
        self._chunk = b""

    def close(self) -> None:
        os.close(self._fd)
        self._chunk = b""


class DiskQueue:
    """A FIFO of byte payloads on disk, in go-diskqueue's format.

    ``min_msg_size`` and ``max_msg_size`` bound each payload's length, both inclusive
    (nsqd passes 26 and ``--max-msg-size`` + 26). ``sync_every``: fsync after that many
    puts and gets together (0 or 1: after each). ``sync_timeout`` (seconds): the owner
    calls ``sync_if_due`` periodically, which syncs when something changed and the last
    sync is at least that old. ``segments``: the numbers of this queue's segment files, sorted,
    when the caller has listed the directory already (nsqd lists it once for every queue
    it opens at start); else the open lists it.
    """

    def __init__(
        self,
        name: str,
        data_path: str | os.PathLike[str],
        *,
        max_bytes_per_file: int,
        min_msg_size: int,
        max_msg_size: int,
        sync_every: int,
        sync_timeout: float,
        logger: logging.Logger | None = None,
        segments: list[int] | None = None,
    ) -> None:
        if max_bytes_per_file <= 0:
            raise ValueError(f"max_bytes_per_file must be positive, got {max_bytes_per_file}")
        if not 0 <= min_msg_size <= max_msg_size:
            raise ValueError(f"need 0 <= min_msg_size <= max_msg_size, got {min_msg_size}, {max_msg_size}")
        if sync_every < 0 or sync_timeout < 0:
            raise ValueError("sync_every and sync_timeout must not be negative")
        self._name = name
        self._dir = Path(data_path)
        if segments is None and not self._dir.is_dir():  # else the caller listed the directory
            raise DiskQueueError(f"data path {self._dir} is not a directory")
        self._max_bytes_per_file = max_bytes_per_file
        self._min_msg_size = min_msg_size
        self._max_msg_size = max_msg_size
        self._sync_every = sync_every
        self._sync_timeout = sync_timeout
        self._log = logger or logging.getLogger(__name__)

        self._depth = 0
        self._read_file = 0
        self._read_pos = 0
        self._write_file = 0
        self._write_pos = 0
        self._writer_fd: int | None = None
        self._reader: _SegmentReader | None = None
        self._reader_end: int | None = None  # size of a finished read segment, once known
        self._ops_since_sync = 0
        self._dirty = False  # written or read since the last fsync
        self._meta_on_disk: _Metadata | None = None  # what the metadata file holds, when known
        self._last_sync = time.monotonic()
        self._closed = False
        try:
            self._open(segments if segments is not None else self._segment_numbers())
        except OSError as error:
            raise DiskQueueError(f"opening disk queue {name} in {self._dir} failed: {error}") from error

    # ---------------------------------------------------------------- public API

    @property
    def name(self) -> str:
        return self._name

    @property
    def depth(self) -> int:
        return self._depth

    def put(self, data: bytes) -> None:
        """Append one payload. Raises DiskQueueError if it is not stored."""
        self.put_many((data,))

    def put_many(self, items: Sequence[bytes]) -> None:
        """Append payloads in order, one write per segment touched.

        Sizes are all checked before anything is written. On an I/O error the payloads
        already written to earlier segments stay queued and DiskQueueError is raised.
        """
        self._ensure_open()
        if not items:
            return
        lengths = list(map(len, items))
        if min(lengths) < self._min_msg_size or max(lengths) > self._max_msg_size:
            size = next(n for n in lengths if not self._min_msg_size <= n <= self._max_msg_size)
            raise DiskQueueError(
                f"invalid message write size ({size}), must be between "
                f"{self._min_msg_size} and {self._max_msg_size}"
            )
        total = sum(lengths) + _ENTRY_LENGTH.size * len(lengths)
        if self._write_pos + total <= self._max_bytes_per_file:  # one segment: no Python step per payload
            self._append(list(chain.from_iterable(zip(map(_ENTRY_LENGTH.pack, lengths), items))), total)
            self._after_ops(len(lengths), raise_errors=True)
            return
        batch: list[bytes] = []
        batch_bytes = 0
        for data in items:
            entry_bytes = _ENTRY_LENGTH.size + len(data)
            end = self._write_pos + batch_bytes
            if end > 0 and end + entry_bytes > self._max_bytes_per_file:
                self._append(batch, batch_bytes)
                batch, batch_bytes = [], 0
                self._roll_write_segment()
            batch.append(_ENTRY_LENGTH.pack(len(data)))
            batch.append(data)
            batch_bytes += entry_bytes
        self._append(batch, batch_bytes)
        self._after_ops(len(items), raise_errors=True)

    def get(self) -> bytes | None:
        """The next payload (removing it from the queue), or None when the queue is empty.

        Damaged segments are set aside and skipped; this never raises for them.
        """
        self._ensure_open()
        while not self._nothing_to_read():
            try:
                payload = self._read_next()
            except _CorruptSegment as damage:
                self._skip_damaged_segment(damage)
                continue
            if payload is not None:
                self._after_ops(1, raise_errors=False)
                return payload
        return None

    def get_many(self, limit: int) -> list[bytes]:
        """Up to ``limit`` next payloads, oldest first (fewer when the queue has fewer).

        Entries that lie whole in the chunk already read are parsed in one tight loop;
        anything else (a chunk or segment boundary, damage) goes through ``get``."""
        out: list[bytes] = []
        while len(out) < limit:
            run = self._read_run(limit - len(out))
            if run:
                out += run
                continue
            payload = self.get()
            if payload is None:
                break
            out.append(payload)
        return out

    def _read_run(self, limit: int) -> list[bytes]:
        """Well-formed entries from the read position, as far as the chunk in memory, the
        read segment and ``limit`` go; none when the next entry needs the general path."""
        reader = self._reader
        if reader is None or self._closed or self._nothing_to_read() or not self._runs_allowed():
            return []
        end = self._read_end(reader)
        chunk, base = reader._chunk, reader._chunk_start
        pos, stop = self._read_pos, min(end, base + len(chunk))
        low, high, unpack = self._min_msg_size, self._max_msg_size, _ENTRY_LENGTH.unpack_from
        run: list[bytes] = []
        while len(run) < limit and pos + 4 <= stop:
            offset = pos - base
            (length,) = unpack(chunk, offset)
            if not low <= length <= high or pos + 4 + length > stop:
                break  # damage, or an entry past the chunk: the general path decides
            run.append(chunk[offset + 4:offset + 4 + length])
            pos += 4 + length
        if not run:
            return []
        self._read_pos = pos
        self._depth = max(0, self._depth - len(run))
        self._dirty = True
        if self._read_file < self._write_file and pos >= end:
            self._finish_read_segment()
        self._correct_depth_when_caught_up()
        self._after_ops(len(run), raise_errors=False)
        return run

    def _runs_allowed(self) -> bool:
        """Hook: whether entries may be read without the per-entry hooks."""
        return True

    def unread(self) -> Iterator[bytes]:
        """Every payload written and not read yet, oldest first, without moving the read
        position (in durable mode, written but not yet readable ones too). Made as it is
        taken: exhaust it before the queue is read or written again."""
        self._ensure_open()
        for number in range(self._read_file, self._write_file + 1):
            start = self._read_pos if number == self._read_file else 0
            end = self._write_pos if number == self._write_file else None
            yield from _segment_payloads(self._segment_path(number), start, self._min_msg_size,
                                         self._max_msg_size, self._log, end)

    def empty(self) -> None:
        """Drop every payload: delete the segments and start afresh at the next file number."""
        self._ensure_open()
        self._close_reader()
        self._close_writer()
        for number in self._segment_numbers():
            self._remove(self._segment_path(number))
        self._write_file += 1
        self._write_pos = 0
        self._read_file = self._write_file
        self._read_pos = 0
        self._depth = 0
        self._flush_to_disk()

    def sync(self) -> None:
        """Flush the write segment to disk and persist the metadata."""
        self._ensure_open()
        self._flush_to_disk()

    def sync_if_due(self, now: float) -> None:
        """Sync if anything changed since the last sync and that was ``sync_timeout`` ago.

        ``now`` is ``time.monotonic()``. Errors are logged, not raised: this is the
        owner's periodic housekeeping.
        """
        if not self.sync_due(now):
            return
        try:
            self._sync()
        except DiskQueueError as error:
            self._log.error("DISKQUEUE(%s): periodic sync failed: %s", self._name, error)

    def sync_due(self, now: float) -> bool:
        """Whether ``sync_if_due(now)`` would sync."""
        return not self._closed and self._dirty and now - self._last_sync >= self._sync_timeout

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._name})"

    def close(self) -> None:
        """Sync and close the files; the data stays for the next open."""
        if self._closed:
            return
        try:
            if self._dirty or self._current_metadata() != self._meta_on_disk:
                self._flush_to_disk()  # else all is on disk already: an idle queue costs no fsync
        finally:
            self._close_reader()
            self._close_writer()
            self._closed = True

    def delete(self) -> None:
        """Close and remove every file of this queue (segments, metadata, set-aside files)."""
        self._close_reader()
        self._close_writer()
        self._closed = True
        for path in self._own_files():
            self._remove(path)
        self._depth = 0

    # ---------------------------------------------------------------- file names

    def _segment_path(self, file_num: int) -> Path:
        return _segment_file(self._dir, self._name, file_num)

    def _meta_path(self) -> Path:
        return _meta_file(self._dir, self._name)

    def _segment_numbers(self) -> list[int]:
        numbers = []
        pattern = _segment_pattern(self._name)
        for entry in os.scandir(self._dir):
            match = pattern.fullmatch(entry.name)
            if match is not None:
                numbers.append(int(match.group(1)))
        return sorted(numbers)

    def _own_files(self) -> list[Path]:
        pattern = _own_file_pattern(self._name)
        return [Path(entry.path) for entry in os.scandir(self._dir) if pattern.fullmatch(entry.name) is not None]

    # ---------------------------------------------------------------- opening / recovery

    def _open(self, segments: list[int]) -> None:
        meta_path = self._meta_path()
        try:
            raw: bytes | None = _read_small_file(str(meta_path))
        except FileNotFoundError:
            raw = None
        except OSError as error:
            self._log.warning("DISKQUEUE(%s): cannot read metadata %s: %s", self._name, meta_path, error)
            raw = b""
        if raw is None:
            if segments:
                self._log.warning(
                    "DISKQUEUE(%s): no metadata file %s but %d segment(s) present; rebuilding from them",
                    self._name, meta_path, len(segments),
                )
                self._rebuild_from_segments(segments)
            return
        meta = _Metadata.decode(raw)
        if meta is None:
            bad_path = meta_path.with_name(meta_path.name + ".bad")
            self._log.warning(
                "DISKQUEUE(%s): metadata file %s is corrupt (%r); set aside as %s, rebuilding from segments",
                self._name, meta_path, raw[:80], bad_path,
            )
            self._rename(meta_path, bad_path)
            self._rebuild_from_segments(segments)
            return
        self._meta_on_disk = meta
        self._depth = meta.depth
        self._read_file, self._read_pos = meta.read_file, meta.read_pos
        self._write_file, self._write_pos = meta.write_file, meta.write_pos
        self._reconcile_with_segments(segments)
        self._correct_depth_when_caught_up()

    def _rebuild_from_segments(self, segments: list[int]) -> None:
        """Read every segment present from its start; write to a fresh segment after them."""
        if segments:
            self._read_file, self._read_pos = segments[0], 0
            self._write_file, self._write_pos = segments[-1] + 1, 0
            self._depth = self._count_unread(segments)
        self._persist_metadata()

    def _reconcile_with_segments(self, segments: list[int]) -> None:
        """Never write over data the metadata does not know about (a crash before a sync)."""
        problems = []
        write_path = self._segment_path(self._write_file)
        size: int | None = None
        if self._write_file in segments:
            try:
                size = os.stat(write_path).st_size
            except FileNotFoundError:
                pass
        if size is None and self._write_pos > 0:
            problems.append(f"write segment {write_path} is missing (metadata write pos {self._write_pos})")
        elif size is not None and size != self._write_pos:
            problems.append(
                f"write segment {write_path} holds {size} bytes, metadata write pos is {self._write_pos}"
            )
        later = [number for number in segments if number > self._write_file]
        if later:
            names = ", ".join(str(self._segment_path(number)) for number in later)
            problems.append(f"segments after the write segment exist: {names}")
        if problems:
            self._write_file = max([self._write_file, *later]) + 1
            self._write_pos = 0
            self._depth = self._count_unread(segments)
            self._log.warning(
                "DISKQUEUE(%s): %s; writing to new segment %s, reader salvages the rest (depth %d)",
                self._name, "; ".join(problems), self._segment_path(self._write_file), self._depth,
            )
            self._persist_metadata()
        elif self._depth < 0:
            self._depth = self._count_unread(segments)
            self._log.warning(
                "DISKQUEUE(%s): negative depth in metadata; recounted %d", self._name, self._depth
            )
            self._persist_metadata()

    def _count_unread(self, segments: list[int]) -> int:
        return sum(
            self._count_entries(number, self._read_pos if number == self._read_file else 0)
            for number in segments
            if self._read_file <= number <= self._write_file
        )

    def _count_entries(self, file_num: int, start: int) -> int:
        """Well-formed entries from ``start``; stops at the first damaged one."""
        try:
            reader = _SegmentReader(self._segment_path(file_num))
        except FileNotFoundError:
            return 0
        try:
            end = reader.size()
            count, pos = 0, start
            while (header := reader.read(pos, _ENTRY_LENGTH.size, end)) is not None:
                (length,) = _ENTRY_LENGTH.unpack(header)
                pos += _ENTRY_LENGTH.size + length
                if not self._min_msg_size <= length <= self._max_msg_size or pos > end:
                    break
                count += 1
            return count
        finally:
            reader.close()

    # ---------------------------------------------------------------- writing

    def _writer(self) -> int:
        if self._writer_fd is None:
            path = self._segment_path(self._write_file)
            self._writer_fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
        return self._writer_fd

    def _append(self, parts: list[bytes], total: int) -> None:
        if not parts:
            return
        data = b"".join(parts)
        try:
            fd = self._writer()
            written = 0
            while written < total:
                written += os.pwrite(fd, memoryview(data)[written:], self._write_pos + written)
        except OSError as error:
            self._discard_partial_write()
            raise DiskQueueError(
                f"writing to {self._segment_path(self._write_file)} failed: {error}"
            ) from error
        self._write_pos += total
        self._depth += len(parts) // 2
        self._dirty = True

    def _discard_partial_write(self) -> None:
        """Cut off a half-written entry so no reader ever parses it."""
        if self._writer_fd is None:
            return
        try:
            os.ftruncate(self._writer_fd, self._write_pos)
        except OSError as error:
            self._log.error(
                "DISKQUEUE(%s): cannot truncate %s after a failed write: %s",
                self._name, self._segment_path(self._write_file), error,
            )
            self._close_writer()
            self._write_file += 1  # leave the damaged tail to the reader's checks
            self._write_pos = 0

    def _roll_write_segment(self) -> None:
        """Finish the write segment (fsync it) and move on to the next file number."""
        try:
            if self._writer_fd is not None:
                os.fsync(self._writer_fd)
        except OSError as error:
            raise DiskQueueError(
                f"fsync of {self._segment_path(self._write_file)} failed: {error}"
            ) from error
        finally:
            self._close_writer()
        self._write_file += 1
        self._write_pos = 0
        self._sync()

    def _close_writer(self) -> None:
        if self._writer_fd is not None:
            fd, self._writer_fd = self._writer_fd, None
            os.close(fd)

    # ---------------------------------------------------------------- reading

    def _reader_caught_up(self) -> bool:
        return (self._read_file, self._read_pos) >= (self._write_file, self._write_pos)

    def _nothing_to_read(self) -> bool:
        """Hook: whether ``get`` has nothing to return now."""
        return self._reader_caught_up()

    def _read_next(self) -> bytes | None:
        """The next payload; None when only moving past the end of a finished segment."""
        try:
            return self._read_entry(self._open_reader())
        except OSError as error:
            raise _CorruptSegment(f"read error ({error})") from error

    def _read_entry(self, reader: _SegmentReader) -> bytes | None:
        end = self._read_end(reader)
        pos = self._read_pos
        if pos == end and self._read_file < self._write_file:
            self._finish_read_segment()
            self._correct_depth_when_caught_up()  # metadata saved with the last entry read, not the move
            return None
        header = reader.read(pos, _ENTRY_LENGTH.size, end)
        if header is None:
            raise _CorruptSegment(f"truncated entry header at offset {pos} (segment ends at {end})")
        (length,) = _ENTRY_LENGTH.unpack(header)
        if not self._min_msg_size <= length <= self._max_msg_size:
            raise _CorruptSegment(
                f"invalid message read size ({length}) at offset {pos}, must be between "
                f"{self._min_msg_size} and {self._max_msg_size}"
            )
        payload = reader.read(pos + _ENTRY_LENGTH.size, length, end)
        if payload is None:
            raise _CorruptSegment(
                f"truncated entry of {length} bytes at offset {pos} (segment ends at {end})"
            )
        self._read_pos = pos + _ENTRY_LENGTH.size + length
        self._depth = max(0, self._depth - 1)
        self._dirty = True
        self._entry_consumed(pos)
        if self._read_file < self._write_file and self._read_pos >= end:
            self._finish_read_segment()
        self._correct_depth_when_caught_up()
        return payload

    def _entry_consumed(self, start_pos: int) -> None:
        """Hook: the entry at ``start_pos`` of the read segment was just read."""

    def _open_reader(self) -> _SegmentReader:
        if self._reader is None:
            path = self._segment_path(self._read_file)
            try:
                self._reader = _SegmentReader(path)
            except FileNotFoundError:
                raise _CorruptSegment("missing", missing=True) from None
            except OSError as error:
                raise _CorruptSegment(f"cannot open: {error}") from error
            self._reader_end = None
        return self._reader

    def _read_end(self, reader: _SegmentReader) -> int:
        """Where the read segment's data ends: its size once finished (whatever
        max_bytes_per_file it was written with), else the write position."""
        if self._read_file < self._write_file:
            if self._reader_end is None:
                self._reader_end = reader.size()
            return self._reader_end
        return self._write_pos

    def _finish_read_segment(self) -> None:
        """Every entry of the read segment has been read: delete it, go to the next."""
        self._close_reader()
        self._remove(self._segment_path(self._read_file))
        self._read_file += 1
        self._read_pos = 0
        self._sync_quietly()

    def _skip_damaged_segment(self, damage: _CorruptSegment) -> None:
        bad_file = self._read_file
        bad_path = self._segment_path(bad_file)
        self._close_reader()
        if bad_file == self._write_file:
            # the writer would keep appending to a file nobody can read past
            self._close_writer()
            self._write_file += 1
            self._write_pos = 0
        if damage.missing:
            later = [n for n in self._segment_numbers() if bad_file < n < self._write_file]
            next_file = later[0] if later else self._write_file
            self._log.warning(
                "DISKQUEUE(%s): segment %s is missing; skipping to segment %s",
                self._name, bad_path, self._segment_path(next_file),
            )
        else:
            self._log.warning(
                "DISKQUEUE(%s): %s in segment %s; set aside as %s, moving to the next segment",
                self._name, damage, bad_path, self._set_aside_path(bad_file),
            )
            next_file = bad_file + 1
        self._leave_damaged_segment(bad_file, next_file, set_aside=not damage.missing)
        self._read_file = next_file
        self._read_pos = 0
        self._correct_depth_when_caught_up()
        self._sync_quietly()

    def _set_aside_path(self, file_num: int) -> Path:
        path = self._segment_path(file_num)
        return path.with_name(path.name + ".bad")

    def _leave_damaged_segment(self, bad_file: int, next_file: int, *, set_aside: bool) -> None:
        """The reader gives up on ``bad_file`` for ``next_file``: keep the file for a human."""
        if set_aside:
            self._rename(self._segment_path(bad_file), self._set_aside_path(bad_file))

    def _correct_depth_when_caught_up(self) -> None:
        if self._reader_caught_up():
            if self._reader is not None:
                self._reader.release_chunk()  # no memory held while idle
            if self._depth != 0:
                self._log.warning(
                    "DISKQUEUE(%s): reader caught up with writer but depth was %d; reset to 0",
                    self._name, self._depth,
                )
                self._depth = 0

    def _close_reader(self) -> None:
        if self._reader is not None:
            reader, self._reader = self._reader, None
            reader.close()
        self._reader_end = None

    # ---------------------------------------------------------------- syncing

    def _after_ops(self, count: int, *, raise_errors: bool) -> None:
        self._ops_since_sync += count
        if self._sync_every > 1 and self._ops_since_sync < self._sync_every:
            return
        if raise_errors:
            self._sync()
        else:
            self._sync_quietly()

    def _sync(self) -> None:
        """Make what was written durable; a subclass may leave that to someone else."""
        self._flush_to_disk()

    def _flush_to_disk(self) -> None:
        """fsync the write segment and persist the metadata, now."""
        if self._writer_fd is not None:
            try:
                os.fsync(self._writer_fd)
            except OSError as error:
                raise DiskQueueError(
                    f"fsync of {self._segment_path(self._write_file)} failed: {error}"
                ) from error
        self._persist_metadata()
        self._ops_since_sync = 0
        self._dirty = False  # written or read since the last fsync
        self._meta_on_disk: _Metadata | None = None  # what the metadata file holds, when known
        self._last_sync = time.monotonic()

    def _sync_quietly(self) -> None:
        try:
            self._sync()
        except DiskQueueError as error:
            self._log.error("DISKQUEUE(%s): sync failed: %s", self._name, error)

    def _current_metadata(self) -> _Metadata:
        return _Metadata(self._depth, self._read_file, self._read_pos, self._write_file, self._write_pos)

    def _persist_metadata(self) -> None:
        meta = self._current_metadata()
        write_metadata_file(self._meta_path(), meta.encode())
        self._meta_on_disk = meta

    # ---------------------------------------------------------------- helpers

    def _ensure_open(self) -> None:
        if self._closed:
            raise DiskQueueError(f"disk queue {self._name} is closed")

    def _remove(self, path: Path) -> None:
        try:
            path.unlink(missing_ok=True)
        except OSError as error:
            self._log.error("DISKQUEUE(%s): cannot remove %s: %s", self._name, path, error)

    def _rename(self, source: Path, target: Path) -> None:
        try:
            os.replace(source, target)
        except OSError as error:
            self._log.error("DISKQUEUE(%s): cannot rename %s to %s: %s", self._name, source, target, error)


# ---------------------------------------------------------------- a closed queue, read-only


def read_unread(data_path: str | os.PathLike[str], name: str, *, min_msg_size: int, max_msg_size: int,
                logger: logging.Logger | None = None) -> Generator[bytes, None, None]:
    """Every payload of the closed queue ``name`` that was not read yet, oldest first,
    without changing any file (a crash while reading leaves the queue as it was).

    It reads from the metadata's read position to the end of that segment and of every
    later one, which is what an open would salvage too; without trustworthy metadata,
    every segment from its start. A damaged entry ends the reading of its segment (an
    open would set the segment aside). One read chunk (1 MiB) is held at a time; close
    the generator when stopping early.
    """
    directory = Path(data_path)
    log = logger or logging.getLogger(__name__)
    pattern = _segment_pattern(name)
    segments = sorted(int(m.group(1)) for entry in os.scandir(directory)
                      if (m := pattern.fullmatch(entry.name)) is not None)
    meta = _read_metadata(directory, name)
    start_file, start_pos = (meta.read_file, meta.read_pos) if meta is not None else (0, 0)
    for number in segments:
        if number >= start_file:
            path = _segment_file(directory, name, number)
            yield from _segment_payloads(path, start_pos if number == start_file else 0,
                                         min_msg_size, max_msg_size, log)


def _read_metadata(directory: Path, name: str) -> _Metadata | None:
    try:
        return _Metadata.decode(_meta_file(directory, name).read_bytes())
    except OSError:
        return None


def _segment_payloads(path: Path, start: int, min_msg_size: int, max_msg_size: int,
                      log: logging.Logger, end: int | None = None) -> Iterator[bytes]:
    """The payloads of one segment from ``start`` to ``end`` (its size when None)."""
    try:
        reader = _SegmentReader(path)
    except FileNotFoundError:
        return
    try:
        if end is None:
            end = reader.size()
        pos = start
        while pos < end:
            header = reader.read(pos, _ENTRY_LENGTH.size, end)
            length = _ENTRY_LENGTH.unpack(header)[0] if header is not None else -1
            valid = min_msg_size <= length <= max_msg_size
            payload = reader.read(pos + _ENTRY_LENGTH.size, length, end) if valid else None
            if payload is None:
                log.warning("DISKQUEUE: damaged entry at offset %d of %s; the rest of that segment "
                            "is not read", pos, path)
                return
            yield payload
            pos += _ENTRY_LENGTH.size + length
    finally:
        reader.close()


def queue_depth(data_path: str | os.PathLike[str], name: str) -> int:
    """Unread messages of the closed queue ``name`` as its metadata counts them (0 without)."""
    meta = _read_metadata(Path(data_path), name)
    return max(0, meta.depth) if meta is not None else 0


def delete_queue_files(data_path: str | os.PathLike[str], name: str) -> int:
    """Remove every file of the closed queue ``name``; how many there were. Raises OSError."""
    pattern = _own_file_pattern(name)
    paths = [Path(entry.path) for entry in os.scandir(data_path) if pattern.fullmatch(entry.name)]
    for path in paths:
        path.unlink(missing_ok=True)
    return len(paths)
