"""Publishing over several nsqds (beyond go-nsq): a static list and/or every nsqd lookupd
knows. Publishes go round-robin to the nodes that are up. A publish that fails on a node
(connection refused or lost, E_PUB_FAILED ...) marks the node down and is retried on the
next node; a down node is probed in the background with growing delays and used again
once it accepts a connection. A publish returns only after some nsqd answered OK, so
nothing is acknowledged that no nsqd acknowledged; a publish whose answer was lost may be
stored twice (at least once, as everywhere in NSQ).
"""
from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from types import TracebackType
from typing import Awaitable, Callable, Iterable, Sequence

from nsq_protocol.errors import E_BAD_BODY, E_BAD_MESSAGE, E_BAD_TOPIC

from .backoff import reconnect_delay
from .config import Config
from .errors import NsqClientError, ProducerStoppedError, PublishError, ServerError
from .lookup import LookupdPoller, NsqdNode, all_nodes
from .producer import Producer

log = logging.getLogger("nsq_client")

# the message itself is at fault: every nsqd would refuse it the same way
_NOT_RETRYABLE = frozenset({E_BAD_TOPIC, E_BAD_MESSAGE, E_BAD_BODY})

Send = Callable[[Producer], Awaitable[None]]


@dataclass(eq=False)
class _Node:
    address: str
    producer: Producer
    static: bool
    up: bool = True
    failures: int = 0
    probe: asyncio.Task[None] | None = field(default=None, repr=False)


class ProducerPool:
    """Publishes through several nsqds, failing over: each publish goes to the next node
    that is up (round-robin) and, when that node fails, to the others in turn. Nodes are given as ``nsqd_addresses`` (TCP ``host:port``),
    found through ``lookupd_addresses`` (HTTP ``host:port``, polled every
    ``lookupd_poll_interval``), or both. A node that fails is marked down and probed until
    it answers again. An error no other node would answer differently (an invalid topic)
    is raised at once; when every node failed, :class:`PublishError` names each one's error."""

    def __init__(self, nsqd_addresses: Iterable[str] = (), config: Config | None = None, *,
                 lookupd_addresses: Iterable[str] = ()) -> None:
        self.config = (config or Config()).model_copy()
        self._nodes: dict[str, _Node] = {}
        self._next = 0
        self._stopped = False
        self._lookupds = list(lookupd_addresses)
        self._poller: LookupdPoller | None = None
        self._removals: set[asyncio.Future[None]] = set()
        self._started: asyncio.Future[None] | None = None
        for address in nsqd_addresses:
            self._add(address, static=True)
        if not self._nodes and not self._lookupds:
            raise ValueError("a pool needs nsqd addresses or lookupd addresses")

    # -- membership ---------------------------------------------------------------------------
    @property
    def nodes(self) -> dict[str, bool]:
        """Each node's address and whether it is considered up."""
        return {n.address: n.up for n in self._nodes.values()}

    def _add(self, address: str, static: bool) -> None:
        if address not in self._nodes:
            self._nodes[address] = _Node(address, Producer(address, self.config), static)

    async def _remove(self, node: _Node) -> None:
        self._nodes.pop(node.address, None)
        if node.probe is not None:
            node.probe.cancel()
        await node.producer.stop()

    def _on_lookupd_nodes(self, found: list[NsqdNode]) -> None:
        listed = {n.tcp_address for n in found}
        for address in listed:
            if address not in self._nodes:
                log.info("pool: adding %s (listed by lookupd)", address)
                self._add(address, static=False)
        for node in list(self._nodes.values()):
            if not node.static and node.address not in listed:
                log.info("pool: removing %s (no longer listed by lookupd)", node.address)
                task = asyncio.ensure_future(self._remove(node))
                self._removals.add(task)
                task.add_done_callback(self._removals.discard)

    async def connect(self) -> None:
        """Connect to every known node now (a node that refuses is marked down and probed)
        and, with lookupds, discover nodes and keep polling. Publishing does this itself
        when it was not done before."""
        if self._started is None:
            self._started = asyncio.ensure_future(self._start())
        await asyncio.shield(self._started)

    async def _start(self) -> None:
        if self._lookupds and self._poller is None:
            self._poller = LookupdPoller(self.config, all_nodes, self._on_lookupd_nodes)
            for address in self._lookupds:
                self._poller.add(address)
            found = await self._poller.poll()
            if self._stopped:
                return
            if found is not None:
                self._on_lookupd_nodes(found)
            self._poller.start(first_round_done=True)
        await asyncio.gather(*(self._connect_node(n) for n in list(self._nodes.values())))

    async def _connect_node(self, node: _Node) -> None:
        try:
            await node.producer.connect()
        except (OSError, NsqClientError, TimeoutError) as err:
            self._mark_down(node, err)

    # -- health ----------------------------------------------------------------------------------
    def _mark_down(self, node: _Node, error: BaseException) -> None:
        node.failures += 1
        if node.up:
            log.warning("pool: %s is down: %r", node.address, error)
        node.up = False
        if (node.probe is None or node.probe.done()) and not self._stopped:
            node.probe = asyncio.create_task(self._probe(node), name=f"nsq-pool-probe-{node.address}")

    def _mark_up(self, node: _Node) -> None:
        if not node.up:
            log.info("pool: %s is back", node.address)
        node.up = True
        node.failures = 0

    async def _probe(self, node: _Node) -> None:
        attempt = 0
        while not node.up and not self._stopped and self._nodes.get(node.address) is node:
            attempt += 1
            await asyncio.sleep(reconnect_delay(self.config, attempt))
            try:
                await node.producer.connect()
            except (OSError, NsqClientError, TimeoutError):
                continue
            self._mark_up(node)

    def _candidates(self) -> list[_Node]:
        """Nodes in the order to try them: those up (round-robin), then those down (they
        may have come back since their last probe)."""
        nodes = list(self._nodes.values())
        if not nodes:
            return []
        start = self._next % len(nodes)
        self._next += 1
        rotated = nodes[start:] + nodes[:start]
        return [n for n in rotated if n.up] + [n for n in rotated if not n.up]

    # -- publishing ----------------------------------------------------------------------------
    async def _publish(self, send: Send) -> None:
        if self._stopped:
            raise ProducerStoppedError("producer pool stopped")
        if self._lookupds:
            await self.connect()  # the first publish waits for discovery's first answer
        causes: dict[str, BaseException] = {}
        for node in self._candidates():
            if self._stopped:
                break
            if node.address in causes or self._nodes.get(node.address) is not node:
                continue
            try:
                await send(node.producer)
            except ServerError as err:
                if err.code in _NOT_RETRYABLE:
                    raise
                causes[node.address] = err
                self._mark_down(node, err)
            except (OSError, NsqClientError, TimeoutError) as err:
                causes[node.address] = err
                if not isinstance(err, ProducerStoppedError):
                    self._mark_down(node, err)
            else:
                self._mark_up(node)
                return
        if self._stopped:
            raise ProducerStoppedError("producer pool stopped")
        raise PublishError(f"no nsqd accepted the publish ({len(causes)} tried)", causes)

    async def publish(self, topic: str, body: bytes) -> None:
        """Publish ``body`` to ``topic`` on one node, trying the others when it fails."""
        await self._publish(lambda p: p.publish(topic, body))

    async def multi_publish(self, topic: str, bodies: Sequence[bytes]) -> None:
        """Publish ``bodies`` to ``topic`` in one MPUB on one node, trying the others when it fails."""
        await self._publish(lambda p: p.multi_publish(topic, bodies))

    async def deferred_publish(self, topic: str, delay: float, body: bytes) -> None:
        """Publish ``body`` to be delivered after ``delay`` seconds, with failover."""
        await self._publish(lambda p: p.deferred_publish(topic, delay, body))

    def publish_nowait(self, topic: str, body: bytes) -> asyncio.Task[None]:
        """Start a publish (with failover) and return its task, for pipelining."""
        return asyncio.ensure_future(self.publish(topic, body))

    # -- stopping --------------------------------------------------------------------------------
    async def stop(self) -> None:
        """Stop polling lookupd and stop every node's producer; later publishes raise
        :class:`ProducerStoppedError`."""
        if self._stopped:
            return
        self._stopped = True
        if self._started is not None and not self._started.done():
            self._started.cancel()
        if self._poller is not None:
            await self._poller.close()
        for node in list(self._nodes.values()):
            if node.probe is not None:
                node.probe.cancel()
        await asyncio.gather(*(n.producer.stop() for n in self._nodes.values()))

    async def __aenter__(self) -> "ProducerPool":
        await self.connect()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.stop()
