"""How long the interpreter's garbage collections stop nsqd, the way Go nsqd reports its
GC pauses: the last 256 pauses, read as the 100th, 99th and 95th percentiles.

CPython's collector stops the whole interpreter while it runs, so the time between
``gc.callbacks``' "start" and "stop" is the pause. One recorder serves the process (the
collector is process-wide): /stats and the statsd pusher read the same numbers.
"""
from __future__ import annotations

import gc
import math
import time
from collections import deque
from typing import Any

KEPT = 256  # Go's runtime keeps as many recent pauses


def percentile(sorted_values: list[float], percent: float) -> float:
    """nsqd's pick for GC pauses: the element at round(percent% of the length)."""
    if not sorted_values:
        return 0.0
    index = min(len(sorted_values) - 1, int(math.floor(percent / 100 * len(sorted_values) + 0.5)))
    return sorted_values[index]


class GcPauses:
    """Durations in seconds of the interpreter's last 256 garbage collections, and how
    many there were and how long they took in all (for a Prometheus summary)."""

    def __init__(self) -> None:
        self.pauses: deque[float] = deque(maxlen=KEPT)
        self.count = 0
        self.total_seconds = 0.0
        self._started = 0.0

    def _callback(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        elif self._started:
            pause = time.perf_counter() - self._started
            self.pauses.append(pause)
            self.count += 1
            self.total_seconds += pause
            self._started = 0.0

    def install(self) -> None:
        if self._callback not in gc.callbacks:
            gc.callbacks.append(self._callback)

    def remove(self) -> None:
        if self._callback in gc.callbacks:
            gc.callbacks.remove(self._callback)

    def percentiles_usec(self) -> dict[str, int]:
        """``gc_pause_usec_100``, ``_99`` and ``_95`` in microseconds (0 before any pause)."""
        ordered = sorted(self.pauses)
        return {f"gc_pause_usec_{p}": int(percentile(ordered, p) * 1e6) for p in (100, 99, 95)}

    def quantiles(self) -> dict[float, float]:
        """The same three percentiles in seconds, by quantile (1, 0.99, 0.95)."""
        ordered = sorted(self.pauses)
        return {p / 100: percentile(ordered, p) for p in (100, 99, 95)}


PROCESS_PAUSES = GcPauses()
