"""nsqd's long-running tasks (queue scan, periodic sync, statsd, group commit, drain, load)
never end silently.

Two layers:

* Each loop catches the failure of one step (one channel's scan, one sync batch, one
  statsd push, one commit round), logs it with its traceback and goes on with the next
  step: a fault in one channel must not stop timeouts and deferrals of every other one.
  A failure that repeats (a broken channel visited ten times a second) is logged with
  its traceback once, then once per ``RELOG_INTERVAL`` with how many were not logged.
* Every background task is watched (``watch``): one that still ends with an exception,
  a failure outside its steps, is logged as critical with its traceback and nsqd stops
  as it stops on SIGTERM - it writes what it holds to disk - and the process exits 1.
  Go's nsqd crashes on a panic in any goroutine, without writing anything; stopping
  after a clean persist is the safer of the two.
"""
from __future__ import annotations

import asyncio
import logging
import time
from typing import Callable, Hashable

RELOG_INTERVAL = 10.0  # seconds between two logs of the same recurring failure
MAX_TRACKED = 1024  # recurring failures remembered at once; beyond, the oldest is forgotten


class FailureLog:
    """Logs failures with their traceback, each recurring one (same key) at most once per
    ``interval``, saying how many occurrences were left out in between. Call ``failed``
    from inside an ``except`` block."""

    def __init__(self, logger: logging.Logger, interval: float = RELOG_INTERVAL,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._log = logger
        self._interval = interval
        self._clock = clock
        self._last: dict[Hashable, tuple[float, int]] = {}  # key -> (logged at, left out since)
        self.count = 0  # failures seen, logged or not

    def failed(self, key: Hashable, what: str) -> None:
        self.count += 1
        now = self._clock()
        last = self._last.get(key)
        if last is not None and now - last[0] < self._interval:
            self._last[key] = (last[0], last[1] + 1)
            return
        left_out = last[1] if last is not None else 0
        self._last.pop(key, None)
        if len(self._last) >= MAX_TRACKED:
            del self._last[next(iter(self._last))]
        self._last[key] = (now, 0)
        suffix = f" ({left_out} more since the last report)" if left_out else ""
        self._log.error("%s%s", what, suffix, exc_info=True)


def watch(task: asyncio.Task, name: str, logger: logging.Logger,
          on_failure: Callable[[str, BaseException], None]) -> asyncio.Task:
    """``task`` is a loop that must run until cancelled: if it ends with an exception,
    log it as critical with its traceback and call ``on_failure``. Returns ``task``."""

    def done(task: asyncio.Task) -> None:
        if task.cancelled():
            return
        error = task.exception()
        if error is None:
            return
        logger.critical("%s stopped: %s", name, error or type(error).__name__,
                        exc_info=(type(error), error, error.__traceback__))
        on_failure(name, error)

    task.add_done_callback(done)
    return task
