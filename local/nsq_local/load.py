"""Load on a cluster: paced producers through one :class:`nsq_client.ProducerPool` over
every nsqd, and one :class:`nsq_client.Consumer` per channel of each topic that finds its
nsqds through the lookupds; everything goes into a :class:`Ledger`.

    load = Load(options, ledger, nsqd_tcp_addresses, lookupd_http_addresses)
    await load.start()
    ...                                  # ledger.begin_phase("during") etc.
    await load.stop_publishing()
    await load.wait_all_delivered(30)
    await load.stop()

The consumers are the load's own (:class:`nsq_client.Consumer`) unless a
:data:`ConsumersFactory` brings others (a third-party client, say) that report every
delivery to the ledger.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Any, Callable, Mapping, Protocol

from nsq_client import Config, Consumer, Handler, Message, NsqClientError, ProducerPool

from .ledger import Ledger
from .options import LoadOptions
from .waiting import wait_until

log = logging.getLogger("nsq_local")

PUBLISH_TIMEOUT = 10.0  # a publish not answered by then counts as failed (it may still be stored)
CONSUMER_STOP_TIMEOUT = 10.0


class Consumers(Protocol):
    """Consumers of every channel of every topic of the load, each delivery reported with
    ``ledger.delivered``; a slow channel (``options.slow_channel``) keeps up with only
    ``slow_share`` of the rate until :meth:`catch_up`."""

    async def start(self) -> None: ...

    def catch_up(self) -> None:
        """Publishing stopped: the slow channel consumes at full speed from now on."""

    async def stop(self) -> object: ...


# (load options, ledger, lookupd HTTP addresses) -> consumers, not started yet
ConsumersFactory = Callable[[LoadOptions, Ledger, list[str]], Consumers]


class Load:
    def __init__(self, options: LoadOptions, ledger: Ledger, nsqd_tcp_addresses: list[str],
                 lookupd_http_addresses: list[str], consumers: ConsumersFactory | None = None,
                 connection: Mapping[str, Any] | None = None) -> None:
        """``connection``: client Config fields every connection gets (TLS, an auth secret)."""
        self.options = options
        self._connection = dict(connection or {})
        self.ledger = ledger
        self._nsqds = list(nsqd_tcp_addresses)
        self._lookupds = list(lookupd_http_addresses)
        self._pool: ProducerPool | None = None
        self._retired_pools: list[ProducerPool] = []
        self._consumers: list[Consumer] = []
        self._consumers_factory = consumers
        self._other_consumers: Consumers | None = None
        self._publishers: list[asyncio.Task[None]] = []
        self._stop_publishing = asyncio.Event()

    def config(self, **fields: Any) -> Config:
        return Config(**{**self._connection, **fields})

    # -- starting ------------------------------------------------------------------------------
    async def start(self) -> None:
        """Subscribe every channel, then start publishing."""
        await self._start_consumers()
        # a node found down is probed again at most every poll interval, as consumers rediscover it
        self._pool = ProducerPool(self._nsqds, self.config(lookupd_poll_interval=self.options.lookupd_poll_interval))
        await self._pool.connect()
        interval = self.options.batch * self.options.publishers / self.options.rate
        for topic in self.options.topics:
            for i in range(self.options.publishers):
                self._publishers.append(asyncio.create_task(
                    self._publish_loop(self._pool, topic, interval, offset=i * interval / self.options.publishers),
                    name=f"nsq-local-publish-{topic}-{i}"))

    async def _start_consumers(self) -> None:
        if self._consumers_factory is not None:
            self._other_consumers = self._consumers_factory(self.options, self.ledger, list(self._lookupds))
            await self._other_consumers.start()
            return
        config = self.config(max_in_flight=self.options.max_in_flight,
                        lookupd_poll_interval=self.options.lookupd_poll_interval)
        for topic in self.options.topics:
            for channel in self.options.channels:
                consumer = Consumer(topic, channel, config, handler=self._handler(topic, channel),
                                    concurrency=self.options.handlers)
                self._consumers.append(consumer)
                await consumer.connect_to_lookupds(self._lookupds)

    def _handler(self, topic: str, channel: str) -> Handler:
        ledger, options, catch_up = self.ledger, self.options, self._stop_publishing
        # each of the consumer's handlers takes this long per message: together they keep
        # up with slow_share of the rate
        pause = options.handlers / (options.slow_share * options.rate) if channel == options.slow_channel else 0.0

        async def handle(message: Message) -> None:
            ledger.delivered(topic, channel, message.body, message.nsqd_address)
            if pause and not catch_up.is_set():
                await asyncio.sleep(pause)  # the slow consumer's work
        return handle

    # -- publishing ----------------------------------------------------------------------------
    def _bodies(self, ids: list[bytes]) -> list[bytes]:
        size = self.options.body_size
        return [(mid + b" ").ljust(size, b".") for mid in ids]

    async def _publish_loop(self, pool: ProducerPool, topic: str, interval: float, offset: float) -> None:
        loop = asyncio.get_running_loop()
        next_at = loop.time() + offset
        while not self._stop_publishing.is_set():
            delay = next_at - loop.time()
            if delay > 0:
                try:
                    async with asyncio.timeout(delay):
                        await self._stop_publishing.wait()
                    return
                except TimeoutError:
                    pass
            else:
                next_at = loop.time()  # running behind: go on at the rate, do not burst to catch up
            next_at += interval
            ids = self.ledger.new_ids(topic, self.options.batch)
            bodies = self._bodies(ids)
            pool = self._pool or pool  # the pool in use: replaced when an nsqd leaves
            try:
                if len(bodies) == 1:
                    async with asyncio.timeout(PUBLISH_TIMEOUT):
                        await pool.publish(topic, bodies[0])
                else:
                    async with asyncio.timeout(PUBLISH_TIMEOUT):
                        await pool.multi_publish(topic, bodies)
            except (NsqClientError, OSError, TimeoutError) as err:
                log.warning("publish of %d messages to %s failed: %r", len(ids), topic, err)
                self.ledger.failed(topic, ids)
            else:
                self.ledger.acknowledged(topic, ids)

    async def remove_nsqd(self, tcp_address: str) -> None:
        """Publish only to the other nsqds from now on (one left for good). Publishes under
        way on the former pool end there; it is stopped with the load."""
        self._nsqds.remove(tcp_address)
        pool = ProducerPool(self._nsqds, self.config(lookupd_poll_interval=self.options.lookupd_poll_interval))
        await pool.connect()
        if self._pool is not None:
            self._retired_pools.append(self._pool)
        self._pool = pool

    async def stop_publishing(self) -> None:
        """Let every publish under way end (answered or failed), start no new one."""
        self._stop_publishing.set()
        if self._other_consumers is not None:
            self._other_consumers.catch_up()
        await asyncio.gather(*self._publishers)

    # -- ending ---------------------------------------------------------------------------------
    async def wait_all_delivered(self, timeout: float) -> bool:
        """Wait until every channel received every acknowledged message; False when some
        are still missing after ``timeout`` seconds."""
        try:
            await wait_until(self._all_delivered, timeout, "every acknowledged message delivered", interval=0.2)
        except TimeoutError:
            return False
        return True

    async def _all_delivered(self) -> bool:
        return self.ledger.undelivered() == 0

    async def stop(self) -> None:
        """Stop publishing, then the consumers (CLS, their in-flight messages answered)."""
        if not self._stop_publishing.is_set():
            await self.stop_publishing()
        await asyncio.gather(*(c.stop(CONSUMER_STOP_TIMEOUT) for c in self._consumers))
        if self._other_consumers is not None:
            await self._other_consumers.stop()
        for pool in [*self._retired_pools, self._pool]:
            if pool is not None:
                await pool.stop()
