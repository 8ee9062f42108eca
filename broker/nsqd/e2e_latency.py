"""End-to-end processing latency (publish to FIN) over a sliding window, in bounded memory.

As in nsqd, the window is kept as two halves: values go into the current half; once it
is older than half of --e2e-processing-latency-window-time the oldest half is dropped and
a fresh one starts, so answers cover between half and all of the window. Each half keeps
an exact count and a uniform sample of at most ``CAPACITY`` values (every value while
fewer arrived, so small workloads get exact percentiles); a percentile weighs each
half's sample by how many values it stands for.
"""
from __future__ import annotations

import random
import time
from typing import Callable, Iterable

CAPACITY = 2048


class _Half:
    __slots__ = ("count", "sample")

    def __init__(self) -> None:
        self.count = 0
        self.sample: list[float] = []

    def add(self, value: float, rng: random.Random) -> None:
        self.count += 1
        if len(self.sample) < CAPACITY:
            self.sample.append(value)
            return
        slot = rng.randrange(self.count)  # reservoir sampling keeps the sample uniform
        if slot < CAPACITY:
            self.sample[slot] = value

    def weighted(self) -> list[tuple[float, float]]:
        if not self.sample:
            return []
        weight = self.count / len(self.sample)
        return [(value, weight) for value in self.sample]


class LatencyWindow:
    def __init__(self, window: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.half_span = window / 2
        self._clock = clock
        self._halves = [_Half(), _Half()]
        self._current = 0
        self._moved_at = clock()
        self._rng = random.Random()

    def add(self, seconds: float) -> None:
        self._roll()
        self._halves[self._current].add(seconds, self._rng)

    def _roll(self) -> None:
        now = self._clock()
        if now - self._moved_at > 2 * self.half_span:  # idle for a whole window: start afresh
            self._halves = [_Half(), _Half()]
            self._moved_at = now
            return
        while now - self._moved_at > self.half_span:
            self._current ^= 1
            self._halves[self._current] = _Half()
            self._moved_at += self.half_span

    @property
    def count(self) -> int:
        self._roll()
        return sum(h.count for h in self._halves)

    def weighted(self) -> list[tuple[float, float]]:
        self._roll()
        return [pair for half in self._halves for pair in half.weighted()]


def percentiles(windows: Iterable[LatencyWindow], wanted: list[float], with_sum: bool = False) -> dict:
    """/stats' ``e2e_processing_latency``: the count and each wanted quantile in
    nanoseconds, over one channel's window or several merged (a topic's). ``with_sum``
    adds ``sum_seconds``, the window's total (for a Prometheus summary; not in /stats)."""
    windows = list(windows)
    if not wanted or not windows:
        return {"count": 0, "percentiles": None}
    count = sum(w.count for w in windows)
    samples = sorted(pair for w in windows for pair in w.weighted())
    total = sum(weight for _, weight in samples)
    out = []
    for q in wanted:
        out.append({"quantile": q, "value": int(_weighted_quantile(samples, total, q) * 1e9)})
    result: dict = {"count": count, "percentiles": out}
    if with_sum:
        result["sum_seconds"] = sum(value * weight for value, weight in samples)
    return result


def _weighted_quantile(samples: list[tuple[float, float]], total: float, q: float) -> float:
    """The smallest value whose cumulative weight reaches ``q`` of the total (0 if none)."""
    if not samples:
        return 0.0
    target = q * total
    reached = 0.0
    for value, weight in samples:
        reached += weight
        if reached >= target - 1e-9:
            return value
    return samples[-1][0]
