"""The queue scan loop: requeues timed-out in-flight messages and releases deferred ones.

As in nsqd: every --queue-scan-interval, sample --queue-scan-selection-count channels at
random and process their in-flight and deferred queues; while more than
--queue-scan-dirty-percent of the sample had work, sample again at once. The channel list
is refreshed every --queue-scan-refresh-interval and whenever channels come or go (nsqd
waits for the refresh; picking new channels up at once makes timeouts fire on time).
nsqd spreads the sample over a pool of goroutines; here the event loop is the one worker,
so --queue-scan-worker-pool-max is accepted and has nothing to size.
"""
from __future__ import annotations

import asyncio
import random
import time
from typing import Callable

from .channel import Channel


class QueueScanner:
    def __init__(self, list_channels: Callable[[], list[Channel]], *, interval: float,
                 refresh_interval: float, selection_count: int, dirty_percent: float) -> None:
        self._list_channels = list_channels
        self.interval = interval
        self.refresh_interval = refresh_interval
        self.selection_count = selection_count
        self.dirty_percent = dirty_percent
        self._channels: list[Channel] = []
        self._refreshed = 0.0
        self._stale = True

    def channels_changed(self) -> None:
        self._stale = True

    async def run(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            while self.scan_once():
                await asyncio.sleep(0)

    def scan_once(self) -> bool:
        """One sample; True when enough of it was dirty to sample again at once."""
        now = time.monotonic()
        if self._stale or now - self._refreshed >= self.refresh_interval:
            self._channels = self._list_channels()
            self._refreshed, self._stale = now, False
        channels = self._channels
        if not channels:
            return False
        sample = channels if len(channels) <= self.selection_count else random.sample(channels, self.selection_count)
        dirty = 0
        for channel in sample:
            if channel.exiting:
                self._stale = True
                continue
            worked = channel.process_in_flight(now) | channel.process_deferred(now)
            if worked:
                dirty += 1
                channel.pump()
        return len(sample) < len(channels) and dirty / len(sample) > self.dirty_percent
