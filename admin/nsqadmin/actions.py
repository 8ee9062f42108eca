"""Admin actions carried to the cluster through nsqd's and nsqlookupd's HTTP APIs, the way
Go nsqadmin carries them: a topic's or channel's pause, unpause and empty go to every nsqd
holding the topic; a delete goes to the lookupds first, then to those nsqds; a tombstone
marks one node's topic in the lookupds and deletes the topic on that node. Each returns a
warning per target that failed; finding no lookupd or nsqd to ask raises UpstreamError."""
from __future__ import annotations

from typing import Awaitable, Callable, Literal

from nsq_client.admin import LookupdAdmin, NsqdAdmin

from .clusterinfo import ClusterInfo, fan_out
from .producers import Producer

Verb = Literal["pause", "unpause", "empty"]
VERBS: tuple[Verb, ...] = ("pause", "unpause", "empty")


class Actions:
    def __init__(self, cluster: ClusterInfo) -> None:
        self.cluster = cluster

    async def _on_lookupds(self, call: Callable[[LookupdAdmin], Awaitable[None]]) -> list[str]:
        _, errors = await fan_out(self.cluster.lookupds, lambda a: call(self.cluster.lookupd(a)))
        return errors

    async def _on_producers(self, producers: list[Producer], call: Callable[[NsqdAdmin], Awaitable[None]]) -> list[str]:
        _, errors = await fan_out(producers, lambda p: call(self.cluster.nsqd(p.url)), lambda p: p.http_address)
        return errors

    async def _on_nsqd_addresses(self, call: Callable[[NsqdAdmin], Awaitable[None]]) -> list[str]:
        _, errors = await fan_out(self.cluster.options.nsqd_http_addresses, lambda a: call(self.cluster.nsqd(a)))
        return errors

    async def create(self, topic: str, channel: str = "") -> list[str]:
        """In the lookupds, and the channel on the nsqds holding the topic. Without lookupds
        (Go then does nothing) the topic and channel are created on the configured nsqds."""
        if not self.cluster.lookupds:
            errors = await self._on_nsqd_addresses(lambda n: n.create_topic(topic))
            if channel:
                errors += await self._on_nsqd_addresses(lambda n: n.create_channel(topic, channel))
            return errors
        errors = await self._on_lookupds(lambda l: l.create_topic(topic))
        if channel:
            errors += await self._on_lookupds(lambda l: l.create_channel(topic, channel))
            producers, found_errors = await self.cluster.topic_producers(topic)
            errors += found_errors
            errors += await self._on_producers(producers, lambda n: n.create_channel(topic, channel))
        return errors

    async def delete_topic(self, topic: str) -> list[str]:
        producers, errors = await self.cluster.topic_producers(topic)
        errors += await self._on_lookupds(lambda l: l.delete_topic(topic))
        return errors + await self._on_producers(producers, lambda n: n.delete_topic(topic))

    async def delete_channel(self, topic: str, channel: str) -> list[str]:
        producers, errors = await self.cluster.topic_producers(topic)
        errors += await self._on_lookupds(lambda l: l.delete_channel(topic, channel))
        return errors + await self._on_producers(producers, lambda n: n.delete_channel(topic, channel))

    async def topic_verb(self, verb: Verb, topic: str) -> list[str]:
        producers, errors = await self.cluster.topic_producers(topic)
        calls = {"pause": lambda n: n.pause_topic(topic), "unpause": lambda n: n.unpause_topic(topic),
                 "empty": lambda n: n.empty_topic(topic)}
        return errors + await self._on_producers(producers, calls[verb])

    async def channel_verb(self, verb: Verb, topic: str, channel: str) -> list[str]:
        producers, errors = await self.cluster.topic_producers(topic)
        calls = {"pause": lambda n: n.pause_channel(topic, channel),
                 "unpause": lambda n: n.unpause_channel(topic, channel),
                 "empty": lambda n: n.empty_channel(topic, channel)}
        return errors + await self._on_producers(producers, calls[verb])

    async def tombstone(self, topic: str, node: str) -> list[str]:
        """``node`` is the nsqd's ``broadcast_address:http_port``."""
        errors = await self._on_lookupds(lambda l: l.tombstone_topic_producer(topic, node))
        producers, found_errors = await self.cluster.nsqd_producers([node])
        errors += found_errors
        return errors + await self._on_producers(producers, lambda n: n.delete_topic(topic))
