"""The queue scan loop: requeues timed-out in-flight messages and releases deferred ones.

As in nsqd: every --queue-scan-interval, sample up to --queue-scan-selection-count channels
at random and process their in-flight and deferred queues; while more than
--queue-scan-dirty-percent of that sample had work, sample again at once (however small
the channel list: a sample of every channel is re-taken too). The channel list is
refreshed every --queue-scan-refresh-interval and whenever channels come or go (nsqd
waits for the refresh; picking new channels up at once makes timeouts fire on time).

Workers: nsqd hands the sample to a pool of goroutines sized to a quarter of the channel
count, between 1 and --queue-scan-worker-pool-max. Here the process's one event loop is
the only worker (processing a channel is a few heap pops and never waits, so more workers
would only take turns on the same loop); the flag is validated (at least 1) and reported
by /config like every option, and sizes nothing.

A channel whose processing raises is logged (with its traceback, see ``background``) and
counted as clean; the scan goes on with the other channels and the next passes.
"""
from __future__ import annotations

import asyncio
import logging
import random
import time
from typing import Callable, Protocol, Sequence

from .background import FailureLog

log = logging.getLogger("nsqd")


class ScannedChannel(Protocol):
    """What the scan needs of a channel."""

    exiting: bool

    def process_in_flight(self, now: float) -> bool: ...

    def process_deferred(self, now: float) -> bool: ...

    def pump(self) -> None: ...


class Clock(Protocol):
    """Time as the scan sees it: the channels' deadlines are on ``now``'s scale."""

    def now(self) -> float: ...

    async def sleep(self, seconds: float) -> None: ...


class MonotonicClock:
    def now(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


class QueueScanner:
    def __init__(self, list_channels: Callable[[], Sequence[ScannedChannel]], *, interval: float,
                 refresh_interval: float, selection_count: int, dirty_percent: float,
                 clock: Clock | None = None) -> None:
        self._list_channels = list_channels
        self.interval = interval
        self.refresh_interval = refresh_interval
        self.selection_count = selection_count
        self.dirty_percent = dirty_percent
        self.clock: Clock = clock or MonotonicClock()
        self._channels: Sequence[ScannedChannel] = []
        self._refreshed = 0.0
        self._stale = True
        self.failures = FailureLog(log)

    def channels_changed(self) -> None:
        self._stale = True

    async def run(self) -> None:
        sleep = self.clock.sleep
        while True:
            await sleep(self.interval)
            while self._scan_logging_failure():
                await sleep(0)  # sample again at once, letting connections in between

    def _scan_logging_failure(self) -> bool:
        try:
            return self.scan_once()
        except Exception:  # outside any one channel (listing them): the next pass retries
            self._stale = True
            self.failures.failed("scan", "QUEUESCAN: pass failed")
            return False

    def scan_once(self) -> bool:
        """One sample; True when more than the dirty fraction of it had work."""
        now = self.clock.now()
        if self._stale or now - self._refreshed >= self.refresh_interval:
            self._channels = self._list_channels()
            self._refreshed, self._stale = now, False
        channels = self._channels
        if not channels:
            return False
        if len(channels) <= self.selection_count:
            sample = channels
        else:
            sample = random.sample(channels, self.selection_count)
        dirty = 0
        for channel in sample:
            if channel.exiting:
                self._stale = True
                continue
            try:
                worked = channel.process_in_flight(now) | channel.process_deferred(now)
                if worked:
                    channel.pump()
            except Exception:
                self.failures.failed(id(channel), f"QUEUESCAN: processing {channel!r} failed")
                continue
            if worked:
                dirty += 1
        return dirty / len(sample) > self.dirty_percent
