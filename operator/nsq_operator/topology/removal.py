"""Taking a topic or channel off every nsqd: refused while it holds messages unless the
spec says otherwise; lookupd forgets the topic's producers first (tombstones) so no
consumer reconnects to a node that is about to lose it."""
from __future__ import annotations

from typing import Awaitable

from nsq_client.admin import LookupdAdmin
from nsq_client.errors import AdminError

from ..builders import names
from ..models.cluster import ClusterRef
from .nodes import Node
from .stats import channel_of, held_by_channel, held_by_topic, topic_stats
from .wishes import ChannelWish, TopicWish


class Refused(Exception):
    """Deletion would lose messages; the message says how many and where."""


async def _unless_missing(call: Awaitable[None]) -> None:
    """Deleting what is already gone is done, not an error."""
    try:
        await call
    except AdminError as e:
        if e.status != 404:
            raise


async def messages_in_topic(nodes: list[Node], wish: TopicWish) -> dict[str, int]:
    held: dict[str, int] = {}
    for node in nodes:
        topic = await topic_stats(node.admin, wish.topic)
        if topic is not None and held_by_topic(topic):
            held[node.pod] = held_by_topic(topic)
    return held


async def messages_in_channel(nodes: list[Node], wish: ChannelWish) -> dict[str, int]:
    held: dict[str, int] = {}
    for node in nodes:
        channel = channel_of(await topic_stats(node.admin, wish.topic), wish.channel)
        if channel is not None and held_by_channel(channel):
            held[node.pod] = held_by_channel(channel)
    return held


def _refusal(what: str, held: dict[str, int]) -> Refused:
    where = ", ".join(f"{pod}: {count}" for pod, count in sorted(held.items()))
    return Refused(f"{what} still holds {sum(held.values())} messages ({where}); drain it, or set "
                   f"spec.deleteWithMessages to true to lose them")


async def _tombstone(lookupds: list[LookupdAdmin], cluster: ClusterRef, nodes: list[Node], topic: str) -> None:
    broadcasts = {names.nsqd_broadcast_address(cluster, node.pod) for node in nodes}
    for lookupd in lookupds:
        for producer in await lookupd.nodes():
            if producer.get("broadcast_address") in broadcasts and topic in (producer.get("topics") or []):
                await lookupd.tombstone_topic_producer(topic, f"{producer['broadcast_address']}:{producer['http_port']}")


async def remove_topic(nodes: list[Node], lookupds: list[LookupdAdmin], cluster: ClusterRef, wish: TopicWish,
                       with_messages: bool) -> None:
    held = await messages_in_topic(nodes, wish)
    if held and not with_messages:
        raise _refusal(f"topic {wish.topic}", held)
    await _tombstone(lookupds, cluster, nodes, wish.topic)
    for node in nodes:
        await _unless_missing(node.admin.delete_topic(wish.topic))
    for lookupd in lookupds:
        await _unless_missing(lookupd.delete_topic(wish.topic))


async def remove_channel(nodes: list[Node], lookupds: list[LookupdAdmin], wish: ChannelWish,
                         with_messages: bool) -> None:
    held = await messages_in_channel(nodes, wish)
    if held and not with_messages:
        raise _refusal(f"channel {wish.topic}/{wish.channel}", held)
    for node in nodes:
        await _unless_missing(node.admin.delete_channel(wish.topic, wish.channel))
    for lookupd in lookupds:
        await _unless_missing(lookupd.delete_channel(wish.topic, wish.channel))
