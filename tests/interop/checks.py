"""What every interop test asserts: exact ID sets per channel and nsqd's own counters."""
from __future__ import annotations

from collections import Counter
from typing import Iterable

from tests.interop.client_process import Record
from tests.servers import Nsqd, wait_for

CHANNELS = ("alpha", "beta", "gamma")


def published_ids(records: Iterable[Record]) -> list[str]:
    """IDs a producer script reported as acknowledged by nsqd."""
    return [str(r["acked"]) for r in records if "acked" in r]


def deliveries(records: Iterable[Record], attempts: int | None = None) -> dict[str, Counter[str]]:
    """Per channel, how many times each body ID was delivered (optionally of one attempt)."""
    by_channel: dict[str, Counter[str]] = {}
    for r in records:
        if "channel" in r and (attempts is None or r["attempts"] == attempts):
            by_channel.setdefault(str(r["channel"]), Counter())[str(r["id"])] += 1
    return by_channel


def damaged_bodies(records: Iterable[Record]) -> list[Record]:
    return [r for r in records if "channel" in r and not r["intact"]]


def every_channel_has(records: list[Record], channels: Iterable[str], count: int) -> bool:
    channels = list(channels)
    if len(records) < count * len(channels):
        return False
    seen = deliveries(records)
    return all(len(seen.get(c, ())) >= count for c in channels)


def assert_exactly_once(delivered: Counter[str], published: set[str], where: str) -> None:
    missing = published - delivered.keys()
    unexpected = delivered.keys() - published
    duplicates = {i: n for i, n in delivered.items() if n > 1}
    assert not (missing or unexpected or duplicates), (
        f"{where}: {len(published)} published, {len(delivered)} distinct delivered; "
        f"missing {len(missing)} {sorted(missing)[:5]}, unexpected {len(unexpected)} "
        f"{sorted(unexpected)[:5]}, duplicated {len(duplicates)} {sorted(duplicates.items())[:5]}")


def wait_channels_settled(nsqd: Nsqd, topic: str, channels: Iterable[str], count: int,
                          timeout: float = 20.0) -> dict[str, dict]:
    """Wait until each channel took ``count`` messages and holds none (queued, in flight, deferred)."""
    channels = list(channels)

    def settled() -> dict[str, dict] | None:
        topic_stats = nsqd.topic(topic)
        if topic_stats is None:
            return None
        by_name = {c["channel_name"]: c for c in topic_stats["channels"]}
        for name in channels:
            c = by_name.get(name)
            if c is None or c["message_count"] != count or c["depth"] or c["in_flight_count"] \
                    or c["deferred_count"]:
                return None
        return by_name
    return wait_for(settled, timeout, message=f"{topic} channels {channels} settled at {count} messages")


def wait_subscribed(nsqd: Nsqd, topic: str, channels: Iterable[str], timeout: float = 15.0) -> None:
    channels = list(channels)

    def subscribed() -> bool:
        topic_stats = nsqd.topic(topic)
        counts = {c["channel_name"]: c["client_count"] for c in topic_stats["channels"]} if topic_stats else {}
        return all(counts.get(c, 0) >= 1 for c in channels)
    wait_for(subscribed, timeout, message=f"a client on each of {topic}/{channels}")


def channel_flags(*channels: str) -> list[str]:
    return [arg for c in channels for arg in ("--channel", c)]
