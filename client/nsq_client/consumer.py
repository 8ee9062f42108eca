"""A consumer: subscribes one channel of one topic on every nsqd it connects to (given
directly or found through lookupd), hands messages to async handlers, answers them, keeps
RDY within ``max_in_flight`` and backs off when handlers fail.

Stopping follows the protocol: CLS on every connection, nsqd answers CLOSE_WAIT and
sends nothing more, the handlers finish what they hold and answer it, each connection
closes once it has nothing in flight, and then :attr:`Consumer.stopped` resolves. A
deadline forces the exit if handlers hang.
"""
from __future__ import annotations

import asyncio
import inspect
import logging
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Awaitable, Callable, Iterable

from nsq_protocol.names import is_valid_channel_name, is_valid_topic_name

from .backoff import BackoffState, Signal, reconnect_delay
from .config import Config
from .conn import Connection, ConnectionDelegate
from .errors import NsqClientError, ServerError
from .lookup import LookupdPoller, NsqdNode, nodes_with_topic
from .message import Message
from .rdy import RdyManager

log = logging.getLogger("nsq_client")

Handler = Callable[[Message], Awaitable[Any]]
GiveUpHook = Callable[[Message], Awaitable[Any] | Any]

FORCED_EXIT_GRACE = 1.0  # seconds cancelled handlers get to end after a stop's deadline


@dataclass(frozen=True, slots=True)
class ConsumerStats:
    messages_received: int
    messages_finished: int
    messages_requeued: int
    messages_given_up: int
    connections: int


class Consumer:
    """Subscribes to ``channel`` of ``topic`` on nsqds given by address
    (:meth:`connect_to_nsqd`) or found through nsqlookupd (:meth:`connect_to_lookupd`),
    and runs ``handler`` (``concurrency`` copies at once) for each message: a handler that
    returns finishes the message, one that raises requeues it with backoff. A message
    delivered more than ``max_attempts`` times goes to ``give_up`` instead. :meth:`stop`
    (or :func:`run_until_signalled`) stops it without losing a message."""

    def __init__(self, topic: str, channel: str, config: Config | None = None, *,
                 handler: Handler | None = None, concurrency: int = 1,
                 give_up: GiveUpHook | None = None) -> None:
        if not is_valid_topic_name(topic):
            raise ValueError(f"invalid topic name {topic!r}")
        if not is_valid_channel_name(channel):
            raise ValueError(f"invalid channel name {channel!r}")
        self.topic = topic
        self.channel = channel
        self.config = (config or Config()).model_copy()
        self._handlers: list[tuple[Handler, int]] = []
        self._give_up = give_up
        self._conns: dict[str, Connection] = {}
        self._connecting: set[str] = set()   # connections being set up
        self._dialing: dict[str, asyncio.Task[None]] = {}  # connects to discovered nsqds
        self._static: set[str] = set()        # nsqds given by address: reconnected when lost
        self._discovered: set[str] = set()    # nsqds lookupd listed in its latest answer
        self._backoff = BackoffState(self.config)
        self._rdy = RdyManager(self.config.max_in_flight, self.config.low_rdy_idle_timeout,
                               self.config.low_rdy_timeout, self._conns, self._backoff)
        self._queue: asyncio.Queue[Message] = asyncio.Queue()
        self._workers: list[asyncio.Task[None]] = []
        self._busy = 0
        self._tasks: set[asyncio.Task[Any]] = set()
        self._redistribute_task: asyncio.Task[None] | None = None
        self._poller: LookupdPoller | None = None
        self._stopping = False
        self._finishing = False
        self._stopped: asyncio.Future[None] | None = None
        self._received = self._finished = self._requeued = self._given_up = 0
        if handler is not None:
            self.add_handler(handler, concurrency)

    # -- configuration ---------------------------------------------------------------
    def add_handler(self, handler: Handler, concurrency: int = 1) -> None:
        """Run ``concurrency`` copies of ``handler``; add handlers before connecting."""
        if concurrency < 1:
            raise ValueError(f"concurrency must be >= 1, got {concurrency}")
        if self._workers:
            raise RuntimeError("add handlers before connecting")
        self._handlers.append((handler, concurrency))

    def set_give_up_hook(self, hook: GiveUpHook | None) -> None:
        """Called with each message delivered more than ``max_attempts`` times, before it
        is FINed without reaching a handler."""
        self._give_up = hook

    def change_max_in_flight(self, max_in_flight: int) -> None:
        """Hold up to ``max_in_flight`` messages from now on (0 pauses delivery)."""
        self.config.max_in_flight = max_in_flight
        self._rdy.set_max_in_flight(self.config.max_in_flight)

    # -- state -------------------------------------------------------------------------
    @property
    def connections(self) -> list[str]:
        """The addresses of the nsqds connected now."""
        return list(self._conns)

    @property
    def lookupd_addresses(self) -> list[str]:
        """The nsqlookupds polled."""
        return self._poller.addresses if self._poller else []

    @property
    def stopped(self) -> asyncio.Future[None]:
        """Resolves once the consumer has stopped."""
        if self._stopped is None:
            self._stopped = asyncio.get_running_loop().create_future()
        return self._stopped

    @property
    def is_stopping(self) -> bool:
        """Whether :meth:`stop` has begun."""
        return self._stopping

    def stats(self) -> ConsumerStats:
        """Counts of the messages received, finished, requeued and given up, and the connections."""
        return ConsumerStats(self._received, self._finished, self._requeued, self._given_up, len(self._conns))

    # -- connecting ----------------------------------------------------------------------
    async def connect_to_nsqd(self, address: str) -> None:
        """Connect and subscribe to the nsqd at ``host:port``; if the connection is lost
        later it is re-established with backoff. Raises if the first attempt fails."""
        self._check_can_connect()
        if address not in self._conns and address not in self._connecting:
            await self._open(address)
        self._static.add(address)

    async def connect_to_nsqds(self, addresses: Iterable[str]) -> None:
        """:meth:`connect_to_nsqd` for each address, side by side."""
        await asyncio.gather(*(self.connect_to_nsqd(a) for a in addresses))

    async def disconnect_from_nsqd(self, address: str) -> None:
        """Close the connection to an nsqd given by address (gracefully, via CLS) and do
        not reconnect to it."""
        if address not in self._static:
            raise ValueError(f"not connected to {address} by address")
        self._static.discard(address)
        conn = self._conns.get(address)
        if conn is not None:
            conn.start_close()
            await conn.wait_closed()

    async def connect_to_lookupd(self, address: str) -> None:
        """Discover nsqds with the topic through the lookupd at ``address`` (its HTTP
        API), now and every ``lookupd_poll_interval``."""
        await self.connect_to_lookupds([address])

    async def connect_to_lookupds(self, addresses: Iterable[str]) -> None:
        """Discover nsqds through each of these nsqlookupds (the union of their answers)."""
        self._check_can_connect()
        self._ensure_workers()
        if self._poller is None:
            self._poller = LookupdPoller(self.config, lambda admin: nodes_with_topic(admin, self.topic),
                                         self._on_lookupd_nodes)
        added = [a for a in addresses if self._poller.add(a)]
        if added and self._poller.addresses == added:  # the first lookupds: query now, then poll
            nodes = await self._poller.poll()
            if nodes is not None:
                self._on_lookupd_nodes(nodes)
                await asyncio.gather(*self._dialing.values(), return_exceptions=True)
            self._poller.start(first_round_done=True)

    def _check_can_connect(self) -> None:
        if self._stopping:
            raise RuntimeError("the consumer is stopping")
        if not self._handlers:
            raise RuntimeError("add a handler before connecting")

    async def _open(self, address: str) -> None:
        self._ensure_workers()
        conn = Connection(address, self.config, _ConsumerEvents(self))
        self._connecting.add(address)
        try:
            await conn.connect()
            await conn.subscribe(self.topic, self.channel)
            if conn.is_closed:  # lost between SUB's answer and now
                raise NsqClientError(f"{address}: connection lost right after SUB")
            self._conns[address] = conn
        except BaseException:
            conn.close()
            raise
        finally:
            self._connecting.discard(address)
            if self._stopping:
                conn.start_close()
                self._check_stopped()
        log.info("(%s) subscribed to %s/%s", address, self.topic, self.channel)
        if not self._stopping:
            self._rdy.rebalance()

    def _spawn(self, coro: Awaitable[Any], name: str) -> asyncio.Task[Any]:
        task = asyncio.ensure_future(coro)
        task.set_name(name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _dial(self, address: str) -> None:
        """Connect to an nsqd lookupd listed; a failure waits for the next poll."""
        try:
            await self._open(address)
        except (OSError, NsqClientError, TimeoutError) as err:
            log.warning("(%s) connecting to a discovered nsqd failed: %s", address, err)
        finally:
            self._dialing.pop(address, None)

    def _on_lookupd_nodes(self, nodes: list[NsqdNode]) -> None:
        if self._stopping:
            return
        listed = {node.tcp_address for node in nodes}
        for address in listed - self._conns.keys() - self._connecting - self._dialing.keys():
            self._dialing[address] = self._spawn(self._dial(address), f"nsq-connect-{address}")
        for address in self._discovered - listed - self._static:
            conn = self._conns.get(address)
            if conn is not None:
                log.info("(%s) no longer listed by lookupd: closing", address)
                conn.start_close()
        self._discovered = listed

    async def _reconnect(self, address: str) -> None:
        attempt = 0
        while not self._stopping and address in self._static and address not in self._conns:
            attempt += 1
            delay = reconnect_delay(self.config, attempt)
            log.info("(%s) reconnecting in %.2fs (attempt %d)", address, delay, attempt)
            await asyncio.sleep(delay)
            if self._stopping or address not in self._static:
                return
            try:
                await self._open(address)
                return
            except (OSError, NsqClientError, TimeoutError) as err:
                log.warning("(%s) reconnect failed: %s", address, err)

    # -- what its connections report (through _ConsumerEvents) -----------------------------
    def _on_message(self, conn: Connection, message: Message) -> None:
        self._received += 1
        self._queue.put_nowait(message)

    def _on_message_finished(self, conn: Connection, message: Message) -> None:
        self._finished += 1
        if not self._stopping:
            self._rdy.signal(Signal.RESUME)

    def _on_message_requeued(self, conn: Connection, message: Message, backoff: bool) -> None:
        self._requeued += 1
        if not self._stopping:
            self._rdy.signal(Signal.BACKOFF if backoff else Signal.CONTINUE)

    def _on_server_error(self, conn: Connection, error: ServerError) -> None:
        log.error("(%s) nsqd error: %s", conn.address, error)

    def _on_close(self, conn: Connection, reason: BaseException | None) -> None:
        if self._conns.get(conn.address) is not conn:
            return  # never finished subscribing
        del self._conns[conn.address]
        log.info("(%s) connection closed: %s", conn.address, reason)
        if self._stopping:
            self._check_stopped()
            return
        self._rdy.rebalance()
        if conn.address in self._static:
            self._spawn(self._reconnect(conn.address), f"nsq-reconnect-{conn.address}")
        elif self._poller is not None:
            self._poller.recheck()

    # -- handlers ---------------------------------------------------------------------------
    def _ensure_workers(self) -> None:
        if self._workers:
            return
        for handler, concurrency in self._handlers:
            for i in range(concurrency):
                self._workers.append(asyncio.create_task(self._work(handler), name=f"nsq-handler-{i}"))
        self._redistribute_task = asyncio.create_task(self._redistribute_loop(), name="nsq-rdy")

    async def _work(self, handler: Handler) -> None:
        while True:
            message = await self._queue.get()
            self._busy += 1
            try:
                await self._handle(handler, message)
            finally:
                self._busy -= 1
                if self._stopping:
                    self._check_stopped()

    async def _handle(self, handler: Handler, message: Message) -> None:
        max_attempts = self.config.max_attempts
        if max_attempts > 0 and message.attempts > max_attempts:
            self._given_up += 1
            log.warning("%r exceeded %d attempts: giving up", message, max_attempts)
            if self._give_up is not None:
                try:
                    result = self._give_up(message)
                    if inspect.isawaitable(result):
                        await result
                except Exception:
                    log.exception("the give-up hook failed for %r", message)
            if not message.has_responded:
                message.finish()
            return
        try:
            await handler(message)
        except Exception as err:
            log.warning("handler failed for %r: %r", message, err)
            if not message.is_auto_response_disabled and not message.has_responded:
                message.requeue(None, backoff=True)
        else:
            if not message.is_auto_response_disabled and not message.has_responded:
                message.finish()

    async def _redistribute_loop(self) -> None:
        while True:
            await asyncio.sleep(self.config.rdy_redistribute_interval)
            self._rdy.redistribute()

    # -- stopping ---------------------------------------------------------------------------
    async def stop(self, timeout: float | None = 30.0) -> None:
        """Stop gracefully (see the module docstring); after ``timeout`` seconds force the
        exit: close every connection and cancel the handlers (nsqd will deliver what they
        held again after its message timeout). Returns once stopped."""
        stopped = self.stopped
        await self._begin_stop()
        try:
            async with asyncio.timeout(timeout):
                await asyncio.shield(stopped)
        except TimeoutError:
            log.warning("graceful stop did not finish within %ss: forcing", timeout)
            self._finish_stop(forced=True)
        await stopped

    async def _begin_stop(self) -> None:
        if self._stopping:
            return
        self._stopping = True
        log.info("stopping: CLS to %d connection(s)", len(self._conns))
        self._rdy.close()
        for task in list(self._tasks):
            task.cancel()
        self._dialing.clear()
        if self._redistribute_task is not None:
            self._redistribute_task.cancel()
        if self._poller is not None:
            await self._poller.close()
        for conn in list(self._conns.values()):
            conn.start_close()
        self._check_stopped()

    def _check_stopped(self) -> None:
        if self._conns or self._connecting or not self._queue.empty() or self._busy:
            return
        self._finish_stop(forced=False)

    def _finish_stop(self, forced: bool) -> None:
        if self._finishing:
            return
        self._finishing = True
        for conn in list(self._conns.values()):
            conn.close()
        for worker in self._workers:
            worker.cancel()
        if forced:
            while not self._queue.empty():
                self._queue.get_nowait()
        asyncio.ensure_future(self._conclude(forced))

    async def _conclude(self, forced: bool) -> None:
        """Resolve :attr:`stopped` once every handler task has ended."""
        tasks = [*self._workers, *([self._redistribute_task] if self._redistribute_task else [])]
        if tasks:
            # a handler that swallows its cancellation must not keep a forced stop waiting
            await asyncio.wait(tasks, timeout=FORCED_EXIT_GRACE if forced else None)
        log.info("stopped%s", " (forced)" if forced else "")
        if not self.stopped.done():
            self.stopped.set_result(None)

    async def __aenter__(self) -> "Consumer":
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.stop()


class _ConsumerEvents(ConnectionDelegate):
    """A consumer's connections report to it through this, so the callbacks stay off the
    consumer's public surface (calling them from outside would corrupt its counts)."""

    def __init__(self, consumer: Consumer) -> None:
        self._consumer = consumer

    def on_message(self, conn: Connection, message: Message) -> None:
        self._consumer._on_message(conn, message)

    def on_message_finished(self, conn: Connection, message: Message) -> None:
        self._consumer._on_message_finished(conn, message)

    def on_message_requeued(self, conn: Connection, message: Message, backoff: bool) -> None:
        self._consumer._on_message_requeued(conn, message, backoff)

    def on_server_error(self, conn: Connection, error: ServerError) -> None:
        self._consumer._on_server_error(conn, error)

    def on_close(self, conn: Connection, reason: BaseException | None) -> None:
        self._consumer._on_close(conn, reason)
