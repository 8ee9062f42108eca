"""A new nsqd gets every declared topic and channel before its readiness gate opens, so
no channel misses a topic's first messages on it."""
from __future__ import annotations

import asyncio
from typing import Any, Iterable

import aiohttp

from nsq_client.errors import NsqClientError

from ..kube.pods import mark_topology_ready, tls_secret_of
from ..models.cluster import ClusterRef
from ..runtime import Runtime
from ..tls_trust import SecretMissing
from ..topology.converge import prepare_node
from ..topology.nodes import Node
from ..topology.ownership import winners
from ..topology.wishes import ChannelWish, TopicWish

# what failing to reach an nsqd or nsqlookupd looks like
REACH_ERRORS = (NsqClientError, aiohttp.ClientError, asyncio.TimeoutError, OSError, SecretMissing)


async def open_gate(rt: Runtime, pod: Any, topics: Iterable[TopicWish], channels: Iterable[ChannelWish]) -> None:
    meta = pod["metadata"]
    cluster = ClusterRef(meta["labels"]["app.kubernetes.io/instance"], meta["namespace"])
    node = Node(meta["name"], await rt.nsqd_admin(cluster, meta["name"], tls_secret_of(pod)))
    await prepare_node(node, sorted(winners(topics), key=lambda t: t.topic),
                       sorted(winners(channels), key=lambda c: (c.topic, c.channel)))
    await mark_topology_ready(rt.kube, dict(pod))
