"""Group commit for durable mode (--sync-before-ack): one fsync round serves every
publisher waiting at that moment.

A publish appends its message to the disk queues, then awaits ``barrier()``. A background
task runs rounds: on the event loop it asks every durable file for a ``SyncJob`` (a
snapshot: duplicated descriptors of files with unsynced writes, metadata as it stands
now); in a worker thread it fsyncs all the data, then the directories that gained files,
and only then writes the metadata; back on the loop it resolves every waiter registered
before the snapshot. Writes made while a round runs wait for the next round, so the loop
keeps accepting and appending while the disk works.

Data strictly before metadata matters: a topic's read cursor moves past messages as soon
as it has copied them into its channels' queues; persisting that cursor before the copies
are durable would lose them in a crash.
"""
from __future__ import annotations

import asyncio
import logging
import os
import time
from dataclasses import dataclass, field
from typing import Callable, Iterable, Protocol

IDLE_ROUND_INTERVAL = 0.1  # seconds between rounds when nobody waits (persists FIN progress)


class SyncError(Exception):
    """A round could not make the waiters' writes durable."""


@dataclass
class SyncJob:
    data_fds: list[int] = field(default_factory=list)  # duplicated descriptors, closed after the round
    directories: list[str] = field(default_factory=list)  # fsynced after the data: they gained files
    write_metadata: Callable[[], None] | None = None  # worker thread, once all data is durable
    on_done: Callable[[], None] | None = None  # event loop, after the round succeeded
    on_failed: Callable[[], None] | None = None  # event loop, after the round failed


class Syncable(Protocol):
    def sync_job(self, now: float, force_metadata: bool) -> SyncJob | None:
        """What to make durable now (None: nothing). Called on the event loop."""


def run_jobs(jobs: list[SyncJob]) -> None:
    """One round's disk work, in a worker thread."""
    try:
        for job in jobs:
            for fd in job.data_fds:
                os.fsync(fd)
        for directory in sorted({d for job in jobs for d in job.directories}):
            dir_fd = os.open(directory, os.O_RDONLY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)
        for job in jobs:
            if job.write_metadata is not None:
                job.write_metadata()
    finally:
        for job in jobs:
            for fd in job.data_fds:
                os.close(fd)


class GroupCommitter:
    def __init__(self, sources: Callable[[], Iterable[Syncable]], *,
                 idle_interval: float = IDLE_ROUND_INTERVAL,
                 logger: logging.Logger | None = None) -> None:
        self._sources = sources
        self._idle_interval = idle_interval
        self._log = logger or logging.getLogger(__name__)
        self._waiters: list[asyncio.Future[None]] = []
        self._wake = asyncio.Event()
        self._closing = False
        self._task: asyncio.Task[None] | None = None
        self.rounds = 0  # successful rounds, idle ones included
        # rounds that released at least one waiting publish, and how many publishes they
        # released: far fewer rounds than publishes is group commit at work
        self.acknowledging_rounds = 0
        self.acknowledged_publishes = 0

    def start(self) -> asyncio.Task[None]:
        self._task = asyncio.get_running_loop().create_task(self._run())
        return self._task

    def barrier(self) -> asyncio.Future[None]:
        """Resolves once everything written before this call is on disk (SyncError if not)."""
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        self._wake.set()
        return waiter

    async def close(self) -> None:
        """Finish the running round, then one last round that also writes all metadata."""
        self._closing = True
        self._wake.set()
        if self._task is not None:
            task, self._task = self._task, None
            await asyncio.gather(task, return_exceptions=True)  # a failure is logged by its watcher
        await self._round(force_metadata=True)

    async def _run(self) -> None:
        while not self._closing:
            try:
                async with asyncio.timeout(self._idle_interval):
                    await self._wake.wait()
            except TimeoutError:
                pass
            if self._closing:
                return
            self._wake.clear()
            await self._round(force_metadata=False)

    async def _round(self, *, force_metadata: bool) -> None:
        waiters, self._waiters = self._waiters, []
        jobs: list[SyncJob] = []
        try:
            try:
                now = time.monotonic()
                for source in self._sources():
                    job = source.sync_job(now, force_metadata)
                    if job is not None:
                        jobs.append(job)
            except BaseException:
                for job in jobs:
                    for fd in job.data_fds:
                        os.close(fd)
                raise
            if jobs:
                await asyncio.to_thread(run_jobs, jobs)
        except Exception as error:
            self._log.error("DURABLE: sync round failed: %s", error, exc_info=True)
            for job in jobs:
                if job.on_failed is not None:
                    job.on_failed()
            failure = SyncError(f"sync to disk failed: {error}")
            for waiter in waiters:
                if not waiter.done():
                    waiter.set_exception(failure)
            return
        self.rounds += 1
        released = sum(1 for waiter in waiters if not waiter.done())
        if released:
            self.acknowledging_rounds += 1
            self.acknowledged_publishes += released
        # waiters first: a publisher's OK is written before a consumer on the same
        # connection is handed the message (on_done makes it readable, on a later turn)
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)
        for job in jobs:
            if job.on_done is not None:
                try:
                    job.on_done()
                except Exception:  # the other queues' progress still counts
                    self._log.exception("DURABLE: after a sync round, a queue failed to take it in")
