"""The copies a backup keeps, in memory and in one append-only log per owner under
``<data-path>/replication/``: the owner's APPEND, FIN, CHANNELS, EMPTY, PAUSE and REQ frames as received,
replayed at start. Writes are grouped: the frames of a turn of the event loop are
written together and, in durable mode, fsynced once before any of them is answered."""
from __future__ import annotations

import asyncio
import logging
import os
import re
from typing import Callable, Sequence

from ..write_all import append_whole
from .shard import Shard
from .wire import Frame, Kind, channels as channels_frame, hello, pause as pause_frame, raw_frames, synced

log = logging.getLogger("nsqd")

MARKER = "started"  # written by the first start on a data path
COMPACT_BYTES = 1 << 20  # a log of owners with nothing left is cut down past this size
# The owner's own shard is written this long after its first unwritten frame: nothing
# waits for that log (a backup's copies answer for a publish, not it), so one write
# serves the loop turns of that time instead of one write each.
OWN_LOG_DELAY = 0.005


def _file_name(owner: str) -> str:
    return re.sub(r"[^A-Za-z0-9.-]", "_", owner) + ".log"


class ReplicaStore:
    def __init__(self, data_path: str, *, durable: bool) -> None:
        self.path = os.path.join(data_path, "replication")
        self.durable = durable
        self.shards: dict[str, dict[str, Shard]] = {}  # owner -> topic -> shard
        self.generations: dict[str, int] = {}  # owner -> the generation its copies here belong to
        self.incarnations: dict[str, str] = {}  # owner -> the life of its data path they belong to ("": not told)
        self._synced: set[str] = set()  # owners whose log here holds a whole snapshot (a SYNCED)
        self._fds: dict[str, int] = {}
        self._sizes: dict[str, int] = {}
        self._unwritten: dict[str, list[bytes]] = {}
        self._waiting: list[Callable[[], None]] = []
        self._committing = False
        self._write_timer: asyncio.TimerHandle | None = None

    # -- replay -----------------------------------------------------------------
    def fresh(self) -> bool:
        """No replication state on disk yet (a new node, or one whose data path was
        wiped); ``load`` leaves a marker, so this is True at most once per data path."""
        return not os.path.exists(os.path.join(self.path, MARKER))

    def load(self) -> None:
        os.makedirs(self.path, exist_ok=True)
        marker = os.path.join(self.path, MARKER)
        if not os.path.exists(marker):
            with open(marker, "w") as f:
                f.write("replication state of this data path\n")
                f.flush()
                os.fsync(f.fileno())
        for name in sorted(os.listdir(self.path)):
            if not name.endswith(".log"):
                continue
            with open(os.path.join(self.path, name), "rb") as f:
                data = f.read()
            frames = raw_frames(data)
            owner = self._owner_of(frames)
            if owner is None:
                continue
            self.generations[owner] = max(frames[0][0].generation, 1)
            self.incarnations[owner] = frames[0][0].incarnation
            for frame, _ in frames[1:]:
                self._apply(owner, frame)
            kept = sum(len(raw) for _, raw in frames)
            if kept < len(data):  # a torn last frame: cut it off before appending more
                log.warning("REPLICATION: %s ends with %d bytes of a torn frame, dropped", name, len(data) - kept)
                os.truncate(os.path.join(self.path, name), kept)
            self._sizes[owner] = kept

    @staticmethod
    def _owner_of(frames: list[tuple[Frame, bytes]]) -> str | None:
        if not frames or frames[0][0].kind is not Kind.HELLO:
            return None
        return frames[0][0].name

    # -- generations --------------------------------------------------------------
    def begin(self, owner: str, generation: int, incarnation: str = "") -> None:
        """``owner`` speaks in ``generation`` of ``incarnation``: copies of an older
        generation were adopted (an owner moves on only when told so), and what is left
        of another incarnation holds nothing live (else it is adopted first: see
        ``BackupConnection._hello``); either goes."""
        generation = max(generation, 1)
        if self.generations.get(owner, generation) < generation or self._another_incarnation(owner, incarnation):
            self.drop(owner)
        self.generations[owner] = generation
        if incarnation:
            self.incarnations[owner] = incarnation

    def generation(self, owner: str) -> int:
        return self.generations.get(owner, 1)

    def other_life(self, owner: str, generation: int, incarnation: str) -> bool:
        """Whether the live copies held of ``owner`` belong to a life of it that is over:
        it says a generation older than theirs (only a lost data path goes back), or
        another incarnation than theirs."""
        if not self.held(owner):
            return False
        return self.generation(owner) > generation or self._another_incarnation(owner, incarnation)

    def _another_incarnation(self, owner: str, incarnation: str) -> bool:
        """Both sides named (an older version names none) and they differ."""
        known = self.incarnations.get(owner, "")
        return bool(incarnation and known and known != incarnation)

    def keeps_log(self, owner: str) -> bool:
        """Whether this store holds ``owner``'s current generation whole: its log took a
        snapshot to its end (SYNCED) and has followed since. A new or wiped backup, or one
        whose snapshot was cut off by a lost connection, needs a (new) snapshot."""
        return owner in self._synced

    # -- changes ----------------------------------------------------------------
    def apply(self, owner: str, frame: Frame, raw: bytes) -> None:
        """An owner's frame: applied now, written to its log at the next commit."""
        self._apply(owner, frame)
        self._unwritten.setdefault(owner, []).append(raw)

    def append_own(self, owner: str, topic: str, payloads: Sequence[bytes], defer_until_ms: int, raw: bytes) -> None:
        """``owner``'s own fresh publish (``raw``: its APPEND frame), as ``apply`` would
        take it, kept as one record instead of a copy per message (see ``Shard``)."""
        self._shard(owner, topic).append_fresh(payloads, defer_until_ms)
        self._unwritten.setdefault(owner, []).append(raw)

    def merge(self, owner: str, frame: Frame) -> None:
        """Another backup's copy of an owner's frame, for an adoption: memory only. Its
        channel list may be older or newer than ours: the union owes no channel less."""
        if frame.kind is Kind.CHANNELS:
            shard = self._shard(owner, frame.topic)
            known = set(shard.channels)
            shard.set_channels(shard.channels + [c for c in frame.channels if c not in known])
            return
        if frame.kind is Kind.PAUSE:  # ours is the newest we know of: another's only fills a gap
            shard = self._shard(owner, frame.topic)
            shard.paused.setdefault(frame.channel, frame.paused)
            return
        self._apply(owner, frame)

    def _apply(self, owner: str, frame: Frame) -> None:
        if frame.kind is Kind.SYNCED:
            self._synced.add(owner)
            return
        if frame.kind is Kind.RESET:  # a snapshot begins: not whole again until its SYNCED
            self._synced.discard(owner)
            return
        shard = self._shard(owner, frame.topic)
        if frame.kind is Kind.APPEND_RUN:
            shard.append_run(frame.payloads, frame.due_ms)
        elif frame.kind is Kind.APPEND:
            shard.append(frame.entries)
        elif frame.kind is Kind.FIN:
            shard.finish(frame.channel, frame.ids)
        elif frame.kind is Kind.CHANNELS:
            shard.set_channels(frame.channels)
        elif frame.kind is Kind.EMPTY:
            shard.empty(frame.channel, frame.ids)
        elif frame.kind is Kind.PAUSE:
            shard.set_paused(frame.channel, frame.paused)
        elif frame.kind is Kind.REQ:
            shard.requeue(frame.channel, frame.due_ms, frame.ids)

    def _shard(self, owner: str, topic: str) -> Shard:
        """``owner``'s shard of ``topic``, made when first needed (not a new one per frame)."""
        shards = self.shards.get(owner)
        if shards is None:
            shards = self.shards[owner] = {}
        shard = shards.get(topic)
        if shard is None:
            shard = shards[topic] = Shard()
        return shard

    def drop(self, owner: str) -> None:
        """Forget an owner's copies (adopted): memory and log."""
        self.shards.pop(owner, None)
        self._unwritten.pop(owner, None)
        fd = self._fds.pop(owner, None)
        if fd is not None:
            self._close_fd(fd)
        self._sizes.pop(owner, None)
        self.generations.pop(owner, None)
        self.incarnations.pop(owner, None)
        self._synced.discard(owner)
        try:
            os.unlink(os.path.join(self.path, _file_name(owner)))
        except FileNotFoundError:
            pass

    def held(self, owner: str) -> int:
        return sum(len(s) for s in self.shards.get(owner, {}).values())

    def held_topic(self, owner: str, topic: str) -> int:
        shard = self.shards.get(owner, {}).get(topic)
        return 0 if shard is None else len(shard)

    # -- commits ----------------------------------------------------------------
    def after_commit(self, callback: Callable[[], None]) -> None:
        """Run ``callback`` once everything applied so far is written (and fsynced in
        durable mode)."""
        self._waiting.append(callback)
        if not self._committing:
            self._committing = True
            loop = asyncio.get_running_loop()
            if self.durable:
                loop.create_task(self._commit())
            else:  # nothing to wait for: no task, the rest of this turn's frames join
                loop.call_soon(self._commit_unsynced)

    def write_soon(self) -> None:
        """Write what was applied within ``OWN_LOG_DELAY``, waiting for nothing."""
        if self._write_timer is None:
            self._write_timer = asyncio.get_running_loop().call_later(OWN_LOG_DELAY, self._write_due)

    def _write_due(self) -> None:
        self._write_timer = None
        self.after_commit(_nothing)

    def _close_fd(self, fd: int) -> None:
        """A log's descriptor closed, after the fsync of a commit under way if any (its
        thread may be using it)."""
        if self._committing:
            self._waiting.append(lambda: os.close(fd))
        else:
            os.close(fd)

    async def _commit(self) -> None:
        """Durable mode: write, fsync in a worker thread, then answer; again while more
        frames arrived meanwhile."""
        try:
            await asyncio.sleep(0)  # the rest of this read's frames join the round
            while self._waiting:
                callbacks, self._waiting = self._waiting, []
                try:
                    written = self._write()
                    if written:
                        fds = [self._fds[owner] for owner in written]
                        await asyncio.to_thread(lambda: [os.fsync(fd) for fd in fds])
                    self._compact_emptied(written)
                except OSError as e:
                    # nothing is acknowledged: the owners' publishes fail at their deadline
                    log.error("REPLICATION: writing copies failed: %s", e)
                    continue
                for callback in callbacks:
                    callback()
        finally:
            self._committing = False

    def _commit_unsynced(self) -> None:
        try:
            while self._waiting:
                callbacks, self._waiting = self._waiting, []
                try:
                    self._compact_emptied(self._write())
                except OSError as e:
                    log.error("REPLICATION: writing copies failed: %s", e)
                    continue
                for callback in callbacks:
                    callback()
        finally:
            self._committing = False

    def _compact_emptied(self, written: list[str]) -> None:
        for owner in written:
            if self._sizes.get(owner, 0) > COMPACT_BYTES and self.held(owner) == 0:
                self._compact(owner)

    def _write(self) -> list[str]:
        """Write what was applied since the last commit; the owners written. A write
        that fails (a full disk) leaves its log as it was and its frames unwritten, for
        the next commit to try again."""
        written = []
        for owner in list(self._unwritten):
            chunks = self._unwritten[owner]
            if chunks:
                data = b"".join(chunks)
                append_whole(self._fd(owner), data)
                self._sizes[owner] = self._sizes.get(owner, 0) + len(data)
                written.append(owner)
            del self._unwritten[owner]
        return written

    def _fd(self, owner: str) -> int:
        fd = self._fds.get(owner)
        if fd is None:
            os.makedirs(self.path, exist_ok=True)
            path = os.path.join(self.path, _file_name(owner))
            fresh = not os.path.exists(path) or os.path.getsize(path) == 0
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            if fresh:
                head = hello(owner, self.generation(owner), self.incarnations.get(owner, ""))
                try:
                    append_whole(fd, head)
                except OSError:
                    os.close(fd)
                    raise
                self._sizes[owner] = len(head)
            self._fds[owner] = fd
        return fd

    def _compact(self, owner: str) -> None:
        """Nothing of this owner is left to deliver: its log restarts with the channels
        it has (and what is paused), so later FINs still count against them."""
        data = hello(owner, self.generation(owner), self.incarnations.get(owner, "")) + b"".join(
            channels_frame(topic, shard.channels) + b"".join(pause_frame(topic, c, p) for c, p in shard.paused.items())
            for topic, shard in self.shards.get(owner, {}).items())
        if owner in self._synced:
            data += synced(0)
        path = os.path.join(self.path, _file_name(owner))
        temp = path + ".tmp"
        with open(temp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(temp, path)
        self._close_fd(self._fds.pop(owner))
        self._sizes[owner] = len(data)
        self.shards[owner] = {t: s for t, s in self.shards[owner].items() if s.channels or any(s.paused.values())}

    def close(self) -> None:
        if self._write_timer is not None:
            self._write_timer.cancel()
            self._write_timer = None
        self._write()
        if self._committing:
            return  # a commit's thread may still fsync them: they close with the process
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()


def _nothing() -> None:
    pass
