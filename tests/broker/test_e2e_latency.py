"""End-to-end processing latency: the sliding window's percentiles, its bounded memory,
and --e2e-processing-latency-percentile / -window-time on a real nsqd."""
from __future__ import annotations

import random
from typing import Any

from nsqd.e2e_latency import CAPACITY, LatencyWindow, percentiles
from tests.servers import wait_for


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_small_workloads_get_exact_percentiles() -> None:
    window = LatencyWindow(60, FakeClock())
    for ms in (5, 1, 4, 2, 3):
        window.add(ms / 1000)
    result = percentiles([window], [0.5, 0.99, 1.0, 0.2])
    assert result["count"] == 5
    assert [p["value"] for p in result["percentiles"]] == [3_000_000, 5_000_000, 5_000_000, 1_000_000]
    assert [p["quantile"] for p in result["percentiles"]] == [0.5, 0.99, 1.0, 0.2]


def test_nothing_measured_yet_reads_zero_and_nothing_tracked_reads_null() -> None:
    assert percentiles([LatencyWindow(60)], [0.99]) == {"count": 0, "percentiles": [{"quantile": 0.99, "value": 0}]}
    assert percentiles([], [0.99]) == {"count": 0, "percentiles": None}
    assert percentiles([LatencyWindow(60)], []) == {"count": 0, "percentiles": None}


def test_the_window_slides_by_halves() -> None:
    clock = FakeClock()
    window = LatencyWindow(10, clock)
    window.add(9.0)  # an old, slow message
    clock.now += 6  # into the second half: the first half still counts
    window.add(1.0)
    assert window.count == 2
    clock.now += 5  # the half holding 9.0 is dropped
    assert window.count == 1
    assert percentiles([window], [1.0])["percentiles"][0]["value"] == 1_000_000_000
    clock.now += 60  # idle for longer than the window: nothing left
    assert window.count == 0


def test_memory_is_bounded_and_percentiles_stay_close() -> None:
    rng = random.Random(7)
    window = LatencyWindow(600, FakeClock())
    for _ in range(100_000):
        window.add(rng.random())
    assert window.count == 100_000
    assert len(window.weighted()) <= 2 * CAPACITY
    values = {p["quantile"]: p["value"] / 1e9 for p in percentiles([window], [0.5, 0.9, 0.99])["percentiles"]}
    assert abs(values[0.5] - 0.5) < 0.04 and abs(values[0.9] - 0.9) < 0.03 and abs(values[0.99] - 0.99) < 0.02


def test_a_topic_merges_its_channels_weighted_by_count() -> None:
    busy, quiet = LatencyWindow(60, FakeClock()), LatencyWindow(60, FakeClock())
    for _ in range(3 * CAPACITY):
        busy.add(0.001)
    for _ in range(10):
        quiet.add(5.0)
    merged = percentiles([busy, quiet], [0.5, 0.999, 1.0])
    assert merged["count"] == 3 * CAPACITY + 10
    assert [p["value"] for p in merged["percentiles"]] == [1_000_000, 5_000_000_000, 5_000_000_000]


def test_nsqd_reports_latency_over_its_window(servers: Any, consumer: Any, publish: Any, topic: str) -> None:
    nsqd = servers.nsqd(e2e_processing_latency_percentile=["0.5", "1.0"],
                        e2e_processing_latency_window_time="2s")
    fast = consumer(nsqd, topic, "fast", rdy=10)
    slow = consumer(nsqd, topic, "slow", rdy=10)
    publish(nsqd, topic, *[b"m%d" % i for i in range(4)])
    for msg in fast.read_messages(4):
        fast.fin(msg.id)
    held = slow.read_messages(4)
    wait_for(lambda: nsqd.channel(topic, "fast")["e2e_processing_latency"]["count"] == 4, 5)
    for msg in held:  # finished after the same messages on "fast"
        slow.fin(msg.id)
    wait_for(lambda: nsqd.channel(topic, "slow")["e2e_processing_latency"]["count"] == 4, 5)

    stats = nsqd.topic(topic)
    by_channel = {c["channel_name"]: c["e2e_processing_latency"] for c in stats["channels"]}
    # every message was finished later on "slow" than on "fast", so each order statistic is larger
    fast = [p["value"] for p in by_channel["fast"]["percentiles"]]
    slow = [p["value"] for p in by_channel["slow"]["percentiles"]]
    assert 0 < fast[0] < slow[0] and 0 < fast[1] < slow[1]
    assert stats["e2e_processing_latency"]["count"] == 8
    assert stats["e2e_processing_latency"]["percentiles"][1]["value"] == by_channel["slow"]["percentiles"][1]["value"]

    # nothing more is finished: once the window has passed, the samples are gone
    wait_for(lambda: nsqd.channel(topic, "fast")["e2e_processing_latency"]["count"] == 0, 8,
             message="samples older than the window dropped")
    assert nsqd.channel(topic, "fast")["e2e_processing_latency"]["percentiles"][0]["value"] == 0
