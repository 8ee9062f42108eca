"""Discovery through nsqlookupd: which nsqds have a topic (consumers) or exist at all
(the producer pool), polled every ``lookupd_poll_interval`` after a random start offset of
up to ``lookupd_poll_jitter`` of the interval, so that many clients started together
spread their queries. The queries go over the standard library's HTTP
(:mod:`nsq_client.http_get`): discovery needs no HTTP library."""
from __future__ import annotations

import asyncio
import logging
import random
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Protocol

from nsq_protocol.host_port import join_host_port

from .config import Config
from .errors import AdminError
from .http_get import get_json

log = logging.getLogger("nsq_client")


@dataclass(frozen=True, slots=True)
class NsqdNode:
    """An nsqd as lookupd lists it."""

    broadcast_address: str
    tcp_port: int
    http_port: int
    hostname: str = ""
    version: str = ""

    @property
    def tcp_address(self) -> str:
        return join_host_port(self.broadcast_address, self.tcp_port)

    @property
    def http_address(self) -> str:
        return join_host_port(self.broadcast_address, self.http_port)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "NsqdNode":
        return cls(broadcast_address=str(data["broadcast_address"]), tcp_port=int(data["tcp_port"]),
                   http_port=int(data.get("http_port") or 0), hostname=str(data.get("hostname") or ""),
                   version=str(data.get("version") or ""))


class LookupdApi(Protocol):
    """What discovery asks a lookupd: :class:`LookupdQueries` here, or the admin
    extra's :class:`nsq_client.admin.LookupdAdmin`."""

    async def lookup(self, topic: str) -> dict[str, Any]: ...

    async def nodes(self) -> list[dict[str, Any]]: ...


class LookupdQueries:
    """``GET /lookup`` and ``GET /nodes`` of one lookupd (``host:port`` of its HTTP API,
    or an ``http(s)://`` URL), each bounded by ``timeout`` seconds (its connect by
    ``connect_timeout``, when given)."""

    def __init__(self, address: str, timeout: float | None = 5.0, connect_timeout: float | None = None) -> None:
        self.address = address
        self.timeout = timeout
        self.connect_timeout = connect_timeout

    async def lookup(self, topic: str) -> dict[str, Any]:
        """``{"channels": [...], "producers": [...]}``; :class:`AdminError` 404
        ``TOPIC_NOT_FOUND`` when no nsqd has the topic."""
        return dict(await get_json(self.address, "/lookup", {"topic": topic}, timeout=self.timeout,
                                   connect_timeout=self.connect_timeout))

    async def nodes(self) -> list[dict[str, Any]]:
        return list((await get_json(self.address, "/nodes", timeout=self.timeout,
                                     connect_timeout=self.connect_timeout)).get("producers") or [])


async def nodes_with_topic(lookupd: LookupdApi, topic: str) -> list[NsqdNode]:
    """The nsqds that have ``topic``; none when lookupd does not know the topic."""
    try:
        answer = await lookupd.lookup(topic)
    except AdminError as err:
        if err.status == 404:
            return []
        raise
    return [NsqdNode.from_json(p) for p in answer.get("producers") or []]


async def all_nodes(lookupd: LookupdApi) -> list[NsqdNode]:
    return [NsqdNode.from_json(p) for p in await lookupd.nodes()]


Discover = Callable[[LookupdApi], Awaitable[list[NsqdNode]]]
OnNodes = Callable[[list[NsqdNode]], None]


class LookupdPoller:
    """Queries every lookupd each round and hands the union of their answers to
    ``on_nodes``; a round in which no lookupd answered is skipped (nothing is dropped
    because lookupd is unreachable)."""

    def __init__(self, config: Config, discover: Discover, on_nodes: OnNodes) -> None:
        self.config = config
        self._discover = discover
        self._on_nodes = on_nodes
        self._lookupds: dict[str, LookupdApi] = {}
        self._task: asyncio.Task[None] | None = None
        self._recheck = asyncio.Event()
        self._rng = random.Random()

    @property
    def addresses(self) -> list[str]:
        return list(self._lookupds)

    def add(self, address: str) -> bool:
        """Add a lookupd (``host:port`` of its HTTP API); False if it was known."""
        if address in self._lookupds:
            return False
        self._lookupds[address] = LookupdQueries(address, timeout=self.config.lookupd_poll_timeout or 300)
        return True

    def start(self, *, first_round_done: bool = False) -> None:
        """Poll in the background: a round now, then the random start offset, then a round
        every interval. ``first_round_done``: the caller has just made the opening round
        itself with :meth:`poll`, so the loop begins with the offset instead of a query."""
        if self._task is None:
            self._task = asyncio.create_task(self._run(first_round_done), name="nsq-lookupd-poll")

    def recheck(self) -> None:
        """Poll again now instead of at the next interval (a connection was lost)."""
        self._recheck.set()

    async def poll(self) -> list[NsqdNode] | None:
        """One round; None when no lookupd answered."""
        admins = list(self._lookupds.items())
        results = await asyncio.gather(*(self._discover(admin) for _, admin in admins),
                                       return_exceptions=True)
        found: dict[str, NsqdNode] = {}
        answered = False
        for (address, _), result in zip(admins, results):
            if isinstance(result, BaseException):
                if isinstance(result, asyncio.CancelledError):
                    raise result
                log.warning("lookupd %s query failed: %r", address, result)
                continue
            answered = True
            for node in result:
                found.setdefault(node.tcp_address, node)
        return list(found.values()) if answered else None

    async def _run(self, first_round_done: bool) -> None:
        interval = self.config.lookupd_poll_interval
        if not first_round_done:
            await self._round()
        await self._wait(self._rng.random() * self.config.lookupd_poll_jitter * interval)
        while True:
            await self._wait(interval)
            await self._round()

    async def _wait(self, seconds: float) -> None:
        try:
            async with asyncio.timeout(seconds):
                await self._recheck.wait()
        except TimeoutError:
            pass
        self._recheck.clear()

    async def _round(self) -> None:
        nodes = await self.poll()
        if nodes is not None:
            try:
                self._on_nodes(nodes)
            except Exception:
                log.exception("handling lookupd's answer failed")

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.wait([self._task])  # the caller's own cancellation still reaches it
            self._task = None
