"""Reading one topic's or channel's numbers out of nsqd's /stats."""
from __future__ import annotations

from typing import Any

from nsq_client.admin import NsqdAdmin


async def topic_stats(admin: NsqdAdmin, topic: str) -> dict[str, Any] | None:
    stats = await admin.stats(topic=topic, include_clients=False)
    return next((t for t in stats.get("topics") or [] if t.get("topic_name") == topic), None)


def channel_of(topic: dict[str, Any] | None, channel: str) -> dict[str, Any] | None:
    if topic is None:
        return None
    return next((c for c in topic.get("channels") or [] if c.get("channel_name") == channel), None)


def held_by_channel(channel: dict[str, Any]) -> int:
    return int(channel.get("depth", 0)) + int(channel.get("in_flight_count", 0)) + int(channel.get("deferred_count", 0))


def held_by_topic(topic: dict[str, Any]) -> int:
    """Messages lost if the topic went now: its own queue and every channel's."""
    return int(topic.get("depth", 0)) + sum(held_by_channel(c) for c in topic.get("channels") or [])
