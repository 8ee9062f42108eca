"""Reading one channel's stats across a cluster: the nsqds come from a fixed list of HTTP
addresses or, each round, from every lookupd's ``/lookup`` of the topic; each of them is
asked for ``/stats`` of the topic and channel, and the answers are summed.

A node or lookupd that does not answer is reported on stderr through the log and left
out of that round; a round fails only when none of them answered.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Any, Sequence

from ..errors import NsqClientError
from ..http_get import get_json
from ..lookup import LookupdQueries, nodes_with_topic
from .stat_table import ChannelTotals, channel_totals

log = logging.getLogger("nsq_client")

_FAILURES = (OSError, NsqClientError, TimeoutError)


class StatsUnavailableError(Exception):
    """No nsqd (or no lookupd) answered."""


class ClusterStats:
    def __init__(self, topic: str, channel: str, *, nsqd_http_addresses: Sequence[str] = (),
                 lookupd_http_addresses: Sequence[str] = (), timeout: float = 5.0,
                 connect_timeout: float | None = None) -> None:
        self.topic = topic
        self.channel = channel
        self._nsqds = list(nsqd_http_addresses)
        self._lookupds = list(lookupd_http_addresses)
        self._timeout = timeout
        self._connect_timeout = connect_timeout

    async def close(self) -> None:
        """Nothing to release: each request has a connection of its own."""

    async def nsqd_addresses(self) -> list[str]:
        """The nsqds to ask this round (HTTP ``host:port``)."""
        if not self._lookupds:
            return list(self._nsqds)
        lookupds = [LookupdQueries(a, timeout=self._timeout, connect_timeout=self._connect_timeout) for a in self._lookupds]
        answers = await asyncio.gather(*(nodes_with_topic(a, self.topic) for a in lookupds), return_exceptions=True)
        found: dict[str, None] = {}
        answered = 0
        for lookupd, answer in zip(lookupds, answers):
            if isinstance(answer, BaseException):
                _raise_unexpected(answer)
                log.warning("lookupd %s: %s", lookupd.address, answer)
                continue
            answered += 1
            found.update((node.http_address, None) for node in answer)
        if not answered:
            raise StatsUnavailableError(f"failed to get topic producers: no lookupd answered ({', '.join(self._lookupds)})")
        return list(found)

    async def totals(self) -> ChannelTotals | None:
        """The channel summed over the cluster; None when no nsqd has it."""
        addresses = await self.nsqd_addresses()
        query = {"format": "json", "topic": self.topic, "channel": self.channel, "include_clients": "false"}
        answers = await asyncio.gather(
            *(get_json(a, "/stats", query, timeout=self._timeout, connect_timeout=self._connect_timeout)
              for a in addresses), return_exceptions=True)
        stats: list[dict[str, Any]] = []
        for address, answer in zip(addresses, answers):
            if isinstance(answer, BaseException):
                _raise_unexpected(answer)
                log.warning("nsqd %s: %s", address, answer)
                continue
            stats.append(dict(answer))
        if addresses and not stats:
            raise StatsUnavailableError(f"failed to get nsqd stats: no nsqd answered ({', '.join(addresses)})")
        return channel_totals(stats, self.topic, self.channel)


def _raise_unexpected(error: BaseException) -> None:
    if not isinstance(error, _FAILURES):
        raise error
