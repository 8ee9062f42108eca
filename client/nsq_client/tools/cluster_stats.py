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

import aiohttp

from ..admin import LookupdAdmin, NsqdAdmin
from ..errors import NsqClientError
from ..lookup import nodes_with_topic
from .stat_table import ChannelTotals, channel_totals

log = logging.getLogger("nsq_client")

_FAILURES = (OSError, NsqClientError, aiohttp.ClientError, TimeoutError)


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
        self._session: aiohttp.ClientSession | None = None

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(
                total=self._timeout, sock_connect=self._connect_timeout))
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def nsqd_addresses(self) -> list[str]:
        """The nsqds to ask this round (HTTP ``host:port``)."""
        if not self._lookupds:
            return list(self._nsqds)
        admins = [LookupdAdmin(a, session=self._client(), timeout=self._timeout,
                               connect_timeout=self._connect_timeout) for a in self._lookupds]
        answers = await asyncio.gather(*(nodes_with_topic(a, self.topic) for a in admins), return_exceptions=True)
        found: dict[str, None] = {}
        answered = 0
        for admin, answer in zip(admins, answers):
            if isinstance(answer, BaseException):
                _raise_unexpected(answer)
                log.warning("lookupd %s: %s", admin.address, answer)
                continue
            answered += 1
            found.update((node.http_address, None) for node in answer)
        if not answered:
            raise StatsUnavailableError(f"failed to get topic producers: no lookupd answered ({', '.join(self._lookupds)})")
        return list(found)

    async def totals(self) -> ChannelTotals | None:
        """The channel summed over the cluster; None when no nsqd has it."""
        addresses = await self.nsqd_addresses()
        admins = [NsqdAdmin(a, session=self._client(), timeout=self._timeout,
                            connect_timeout=self._connect_timeout) for a in addresses]
        answers = await asyncio.gather(
            *(a.stats(self.topic, self.channel, include_clients=False) for a in admins), return_exceptions=True)
        stats: list[dict[str, Any]] = []
        for admin, answer in zip(admins, answers):
            if isinstance(answer, BaseException):
                _raise_unexpected(answer)
                log.warning("nsqd %s: %s", admin.address, answer)
                continue
            stats.append(answer)
        if admins and not stats:
            raise StatsUnavailableError(f"failed to get nsqd stats: no nsqd answered ({', '.join(addresses)})")
        return channel_totals(stats, self.topic, self.channel)


def _raise_unexpected(error: BaseException) -> None:
    if not isinstance(error, _FAILURES):
        raise error
