"""A cluster on this machine: nsqlookupds and nsqds as child processes on loopback ports.

Every nsqd registers with every lookupd; nsqadmin, when asked for, asks every lookupd.
A node keeps its directory and its ports for the cluster's whole life, so a restart comes
back on the same disk at the same address, as a pod of a StatefulSet would. A node counts as up once it is ready (``/ready`` where
nsqd has it, else ``/ping``) and, for an nsqd, once every lookupd lists it with all of
its topics.
"""
from __future__ import annotations

import asyncio
import logging
from types import TracebackType

import aiohttp

from nsq_client import AdminError, LookupdAdmin, NsqdAdmin

from .options import ClusterOptions
from .processes import Node
from .waiting import http_status, wait_until

log = logging.getLogger("nsq_local")

NOT_FOUND = 404


class LocalCluster:
    def __init__(self, options: ClusterOptions) -> None:
        self.options = options
        ports = iter(range(options.base_port, 65536)) if options.base_port else None

        def node(kind: str, name: str, flags: dict[str, str | list[str]]) -> Node:
            tcp, http = (next(ports), next(ports)) if ports else (0, 0)
            return Node(kind, name, options.workdir / name, host=options.host, flags=flags,
                        tcp_port=tcp, http_port=http)

        self.lookupds = [node("nsqlookupd", f"nsqlookupd-{i}", dict(options.lookupd_flags))
                         for i in range(options.lookupds)]
        lookupd_tcp = [n.tcp_address for n in self.lookupds]
        self.nsqds = [node("nsqd", f"nsqd-{i}", {"node-id": str(i + 1), "lookupd-tcp-address": lookupd_tcp,
                                                 **options.nsqd_flags})
                      for i in range(options.nsqds)]
        self.admin = node("nsqadmin", "nsqadmin", {"lookupd-http-address": self.lookupd_http_addresses}) \
            if options.admin else None
        self._session: aiohttp.ClientSession | None = None

    # -- addresses ----------------------------------------------------------------------
    @property
    def nsqd_tcp_addresses(self) -> list[str]:
        return [n.tcp_address for n in self.nsqds]

    @property
    def lookupd_http_addresses(self) -> list[str]:
        return [n.http_address for n in self.lookupds]

    @property
    def admin_url(self) -> str | None:
        return f"http://{self.admin.http_address}/" if self.admin else None

    @property
    def session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession()
        return self._session

    def nsqd_admin(self, node: Node) -> NsqdAdmin:
        return NsqdAdmin(node.http_address, session=self.session)

    # -- life ---------------------------------------------------------------------------
    async def start(self) -> None:
        """Start every lookupd, then every nsqd; return once all are up and registered.
        A failure stops whatever was started."""
        try:
            await asyncio.gather(*(n.start(self.options.start_timeout) for n in self.lookupds))
            admin = [self.admin.start(self.options.start_timeout)] if self.admin else []
            await asyncio.gather(*(self.start_nsqd(n) for n in self.nsqds), *admin)
        except BaseException:
            await self.stop()
            raise

    async def start_nsqd(self, node: Node) -> None:
        """Start (or restart, same directory and ports) one nsqd and wait until it is up."""
        await node.start(self.options.start_timeout)
        await self.wait_up(node)

    def remove_nsqd(self, node: Node) -> None:
        """Forget an nsqd that left for good (scaled down): it is no longer one of the
        cluster's nodes; its directory stays on disk."""
        if node.running:
            raise RuntimeError(f"{node.name} is still running")
        self.nsqds.remove(node)

    async def wait_up(self, node: Node) -> None:
        await self.wait_ready(node, self.options.start_timeout)
        await self.wait_registered(node, self.options.start_timeout)

    async def stop(self) -> dict[str, int | None]:
        """SIGTERM nsqadmin, every nsqd (each persists what it holds), then every lookupd;
        the exit code of each node that was running."""
        codes: dict[str, int | None] = {}
        if self.admin is not None and self.admin.running:
            codes[self.admin.name] = await self.admin.stop()
        running = [n for n in self.nsqds if n.running]
        for node, code in zip(running, await asyncio.gather(*(n.stop() for n in running))):
            codes[node.name] = code
        running = [n for n in self.lookupds if n.running]
        for node, code in zip(running, await asyncio.gather(*(n.stop() for n in running))):
            codes[node.name] = code
        if self._session is not None:
            await self._session.close()
            self._session = None
        return codes

    async def __aenter__(self) -> "LocalCluster":
        await self.start()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.stop()

    # -- state of one nsqd ------------------------------------------------------------------
    async def has_drain(self, node: Node) -> bool:
        """Whether this nsqd offers ``POST /drain`` (GET answers its state)."""
        return await http_status(self.session, f"http://{node.http_address}/drain") == 200

    async def is_ready(self, node: Node) -> bool:
        status = await http_status(self.session, f"http://{node.http_address}/ready")
        if status == NOT_FOUND:
            status = await http_status(self.session, f"http://{node.http_address}/ping")
        return status == 200

    async def wait_ready(self, node: Node, timeout: float) -> None:
        await wait_until(lambda: self.is_ready(node), timeout, f"{node.name} ready")

    async def topics_of(self, node: Node) -> set[str]:
        stats = await self.nsqd_admin(node).stats(include_clients=False)
        return {t["topic_name"] for t in stats.get("topics") or []}

    async def messages_held(self, node: Node) -> int:
        """Messages the nsqd holds: queued, in flight and deferred, over every topic and channel."""
        stats = await self.nsqd_admin(node).stats(include_clients=False)
        held = 0
        for topic in stats.get("topics") or []:
            held += int(topic.get("depth") or 0)
            for channel in topic.get("channels") or []:
                held += sum(int(channel.get(k) or 0) for k in ("depth", "in_flight_count", "deferred_count"))
        return held

    async def is_registered(self, node: Node) -> bool:
        """Every lookupd lists the nsqd, with every topic it has."""
        try:
            topics = await self.topics_of(node)
            listings = await asyncio.gather(*(LookupdAdmin(n.http_address, session=self.session).nodes()
                                              for n in self.lookupds))
        except (AdminError, aiohttp.ClientError, asyncio.TimeoutError):
            return False
        for producers in listings:
            entry = next((p for p in producers if p.get("tcp_port") == node.tcp_port
                          and p.get("broadcast_address") == node.host), None)
            if entry is None or not topics <= set(entry.get("topics") or []):
                return False
        return True

    async def wait_registered(self, node: Node, timeout: float) -> None:
        await wait_until(lambda: self.is_registered(node), timeout,
                         f"{node.name} registered with every lookupd")

    # -- topology -----------------------------------------------------------------------------
    async def create_topics(self, topics: list[str], channels: list[str]) -> None:
        """Create every topic with every channel on every nsqd before anything is published,
        so no channel misses messages that reached its topic before it existed; nsqd keeps
        them in its metadata across restarts."""
        async def on(node: Node) -> None:
            admin = self.nsqd_admin(node)
            for topic in topics:
                await admin.create_topic(topic)
                for channel in channels:
                    await admin.create_channel(topic, channel)
            await self.wait_registered(node, self.options.start_timeout)
        await asyncio.gather(*(on(n) for n in self.nsqds))
        log.info("topics %s with channels %s on %d nsqds", topics, channels, len(self.nsqds))
