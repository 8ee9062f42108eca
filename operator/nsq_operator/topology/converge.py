"""Bring one nsqd in line with one topic or channel wish, and report its numbers as that
nsqd states them (read back after any change: status shows what is, not what was asked)."""
from __future__ import annotations

from typing import Any

from nsq_client.errors import AdminError

from ..models import NodeCounts
from .nodes import Node
from .stats import channel_of, topic_stats
from .wishes import ChannelWish, TopicWish


def _sum(channels: list[dict[str, Any]], key: str) -> int:
    return sum(int(c.get(key, 0)) for c in channels)


async def converge_topic(node: Node, wish: TopicWish) -> NodeCounts:
    topic = await topic_stats(node.admin, wish.topic)
    if topic is None:
        await create_topic(node, wish)
        topic = await topic_stats(node.admin, wish.topic) or {}
    if bool(topic.get("paused")) != wish.paused:
        await (node.admin.pause_topic(wish.topic) if wish.paused else node.admin.unpause_topic(wish.topic))
        topic = await topic_stats(node.admin, wish.topic) or {}
    channels = topic.get("channels") or []
    return NodeCounts(pod=node.pod, depth=int(topic.get("depth", 0)), in_flight=_sum(channels, "in_flight_count"),
                      deferred=_sum(channels, "deferred_count"), paused=bool(topic.get("paused")))


async def create_topic(node: Node, wish: TopicWish) -> None:
    """Created with its own number of copies, so that no message is accepted with
    another; an nsqd that refuses the count (replication off on it) gets the topic with
    its default, and the NsqTopic's pass reports why."""
    if wish.replicas is None:
        await node.admin.create_topic(wish.topic)
        return
    try:
        await node.admin.create_topic(wish.topic, replicas=wish.replicas)
    except AdminError as e:
        if e.status != 400:
            raise
        await node.admin.create_topic(wish.topic)


async def set_replicas(node: Node, wish: TopicWish) -> str | None:
    """The topic's count of copies on one nsqd (unchanged when it is already so); why
    nsqd refused it (e.g. the topic holds messages there), None when applied."""
    if wish.replicas is None:
        return None
    try:
        await node.admin.create_topic(wish.topic, replicas=wish.replicas)
    except AdminError as e:
        if e.status != 400:
            raise
        return f"{node.pod}: {e.message}"
    return None


async def converge_channel(node: Node, wish: ChannelWish) -> NodeCounts:
    topic = await topic_stats(node.admin, wish.topic)
    if topic is None:
        await node.admin.create_topic(wish.topic)  # nsqd creates no topic for /channel/create
    channel = channel_of(topic, wish.channel)
    if channel is None:
        await node.admin.create_channel(wish.topic, wish.channel)
        channel = channel_of(await topic_stats(node.admin, wish.topic), wish.channel) or {}
    if bool(channel.get("paused")) != wish.paused:
        if wish.paused:
            await node.admin.pause_channel(wish.topic, wish.channel)
        else:
            await node.admin.unpause_channel(wish.topic, wish.channel)
        channel = channel_of(await topic_stats(node.admin, wish.topic), wish.channel) or {}
    return NodeCounts(pod=node.pod, depth=int(channel.get("depth", 0)), in_flight=int(channel.get("in_flight_count", 0)),
                      deferred=int(channel.get("deferred_count", 0)), paused=bool(channel.get("paused")))


async def prepare_node(node: Node, topics: list[TopicWish], channels: list[ChannelWish]) -> None:
    """Everything declared for the cluster, on one nsqd: topics first, then channels, so
    a topic's first message already finds every channel."""
    for topic in topics:
        await converge_topic(node, topic)
    for channel in channels:
        await converge_channel(node, channel)
