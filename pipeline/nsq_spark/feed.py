"""The NSQ end of the source: subscriptions to one topic/channel on every nsqd (given by
address or found through lookupd), and the messages they delivered, held in arrival
order until Spark has committed the batch that contains them.

Runs on one event loop (see :mod:`loop_thread`). Held messages stay in flight at nsqd: they
count against RDY (so ``max_in_flight`` bounds what waits for Spark) and against nsqd's
message timeout, so they are TOUCHed every ``touch_interval``. A FIN is sent only for
messages of committed batches, on the connection that delivered them.

Nothing fails quietly: an error frame, or a connection lost while it delivered messages
the reader still holds, is kept as the feed's failure, and :meth:`Feed.check` (called by
every reader method) raises it. A connection nsqd closes while nothing of the reader's is
on it (a drained or restarted nsqd) is let go and dialed again (lookupd's nsqds are
found again by the next poll).
"""
from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any, Coroutine

from nsq_client.backoff import reconnect_delay
from nsq_client.conn import Connection, ConnectionDelegate
from nsq_client.errors import ServerError
from nsq_client.rdy import split_max_in_flight
from nsq_protocol import ProtocolError
from nsq_protocol.errors import E_BAD_MESSAGE
from nsq_protocol.message import MESSAGE_HEADER_SIZE

from .ledger import Held, Ledger
from .options import SourceOptions

if TYPE_CHECKING:
    from nsq_client.lookup import LookupdPoller, NsqdNode

log = logging.getLogger("nsq_spark")

DEFAULT_TOUCH_INTERVAL = 30.0  # when nsqd did not say its message timeout
CLOSE_TIMEOUT = 5.0            # for CLS -> CLOSE_WAIT -> closed at stop


class NsqSourceError(RuntimeError):
    """The source lost a connection or got an error from nsqd; the query must stop."""


class Feed(ConnectionDelegate):
    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self.config = options.connection_config()
        self.ledger: Ledger[Connection] = Ledger()
        self._conns: dict[str, list[Connection]] = {}
        self._dialing: set[str] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._poller: LookupdPoller | None = None
        self._failure: BaseException | None = None
        self._draining = False
        self._closing = False

    # -- starting -----------------------------------------------------------------
    async def start(self) -> None:
        """Subscribe on every nsqd given by address (any failure raises) and, with
        lookupds, on every nsqd they list for the topic, then keep polling them."""
        for address in self.options.nsqd_tcp_addresses:
            await self._subscribe(address)
        if self.options.lookupd_http_addresses:
            from nsq_client.lookup import LookupdPoller, nodes_with_topic  # its HTTP client only when used
            topic = self.options.topic
            self._poller = LookupdPoller(self.config, lambda admin: nodes_with_topic(admin, topic),
                                         self._on_lookupd_nodes)
            for address in self.options.lookupd_http_addresses:
                self._poller.add(address)
            found = await self._poller.poll()
            if found is None:
                raise NsqSourceError("no lookupd answered: "
                                     + ", ".join(self.options.lookupd_http_addresses))
            await asyncio.gather(*(self._subscribe_discovered(n.tcp_address) for n in found))
            self._poller.start()
        self._spawn(self._touch_loop())

    async def _subscribe(self, address: str) -> None:
        if address in self._conns or address in self._dialing:
            return
        self._dialing.add(address)
        opened: list[Connection] = []
        try:
            for _ in range(self.options.connections_per_nsqd):
                conn = Connection(address, self.config, self, raw_messages=True)
                await conn.connect()
                opened.append(conn)
                await conn.subscribe(self.options.topic, self.options.channel)
        except BaseException:
            for conn in opened:
                conn.close()
            raise
        finally:
            self._dialing.discard(address)
        if self._closing:
            for conn in opened:
                conn.close()
            return
        self._conns[address] = opened
        log.info("subscribed to %s/%s on %s (%d connections)", self.options.topic,
                 self.options.channel, address, len(opened))
        self._spread_rdy()

    def _on_lookupd_nodes(self, nodes: list[NsqdNode]) -> None:
        for node in nodes:
            address = node.tcp_address
            if address not in self._conns and address not in self._dialing and not self._closing:
                self._spawn(self._subscribe_discovered(address))

    async def _subscribe_discovered(self, address: str) -> None:
        try:
            await self._subscribe(address)
        except Exception as err:  # lookupd may list an nsqd that just went away: next poll retries
            log.warning("cannot subscribe on %s (listed by lookupd): %r", address, err)

    def _spawn(self, coroutine: Coroutine[Any, Any, None]) -> None:
        task = asyncio.ensure_future(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # -- RDY ----------------------------------------------------------------------
    def _connections(self) -> list[Connection]:
        return [c for conns in self._conns.values() for c in conns if not c.is_closing]

    def _spread_rdy(self) -> None:
        """``max_in_flight`` split over the connections (at least 1 each), each clamped to
        the ``max_rdy_count`` its nsqd announced; 0 everywhere while draining."""
        live = self._connections()
        shares = split_max_in_flight(self.options.max_in_flight, len(live))
        for conn, share in zip(live, shares):
            count = 0 if self._draining else min(conn.max_rdy, max(1, share))
            if conn.rdy_count != count:
                conn.send_rdy(count)

    # -- ConnectionDelegate -------------------------------------------------------
    def on_message_frames(self, conn: Connection, payloads: list[bytes]) -> None:
        shortest = min(map(len, payloads))
        if shortest < MESSAGE_HEADER_SIZE:
            raise ProtocolError(E_BAD_MESSAGE, f"message too short ({shortest} bytes)")
        if self._closing or self._draining:
            conn.requeue_ids(Held(payloads).ids)  # sent before RDY 0 reached nsqd
            return
        self.ledger.add(payloads, conn)

    def on_server_error(self, conn: Connection, error: ServerError) -> None:
        self._fail(NsqSourceError(f"{conn.address}: nsqd answered {error.code}: {error.text}"))

    def on_close(self, conn: Connection, reason: BaseException | None) -> None:
        if self._closing:
            return
        if conn.in_flight > 0:  # their FIN has no way to nsqd any more
            self._fail(NsqSourceError(f"{conn.address}: connection lost holding {conn.in_flight} "
                                      f"message(s): {reason}"))
            return
        # nothing of ours was on it (a drained or restarted nsqd): carry on without it
        log.warning("%s closed the connection, holding nothing of ours: %s", conn.address, reason)
        conns = self._conns.get(conn.address, [])
        if conn in conns:
            conns.remove(conn)
        if conns:
            return
        self._conns.pop(conn.address, None)
        self._spread_rdy()
        if conn.address in self.options.nsqd_tcp_addresses:
            self._spawn(self._redial(conn.address))
        elif self._poller is not None:
            self._poller.recheck()

    async def _redial(self, address: str) -> None:
        """Subscribe again on an nsqd given by address, with growing delays until it answers."""
        attempt = 0
        while not self._closing and address not in self._conns:
            attempt += 1
            await asyncio.sleep(reconnect_delay(self.config, attempt))
            try:
                await self._subscribe(address)
            except Exception as err:
                log.warning("cannot subscribe on %s again (attempt %d): %r", address, attempt, err)

    def _fail(self, error: BaseException) -> None:
        if self._failure is None:
            log.error("nsq source failed: %s", error)
            self._failure = error

    def check(self) -> None:
        if self._failure is not None:
            raise NsqSourceError(f"the nsq source failed: {self._failure}") from self._failure

    # -- what the reader asks ------------------------------------------------------
    def admit(self, after: int, max_rows: int | None) -> tuple[int, bool]:
        """The last message the next batch may hold given what came after ``after``, and
        whether messages up to ``after`` still wait for Spark's commit."""
        self.check()
        if self._draining:
            self._requeue(self.ledger.drop_after(after))
        through = self.ledger.received
        if max_rows is not None:
            through = min(through, after + max_rows)
        return max(after, through), self.ledger.released < after

    async def first_deliveries(self, enough: int | None, timeout: float, pause: float = 0.1) -> None:
        """Wait at most ``timeout`` after subscribing for the first messages: until
        ``enough`` arrived, or they stopped arriving for ``pause`` seconds."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        seen, since = self.ledger.received, loop.time()
        while loop.time() < deadline and not (enough and self.ledger.received >= enough):
            await asyncio.sleep(0.02)
            if self.ledger.received != seen:
                seen, since = self.ledger.received, loop.time()
            elif seen and loop.time() - since >= pause:
                break
        self.check()

    def take(self, after: int, through: int) -> Held[Connection]:
        self.check()
        return self.ledger.between(after, through)

    def commit(self, through: int) -> int:
        """FIN every message numbered up to ``through``."""
        self.check()
        finished = self.ledger.release_through(through)
        for conn, ids in finished.by_conn().items():
            conn.finish_ids(ids)
        return len(finished)

    def drain(self) -> None:
        """Take no more messages: RDY 0 everywhere; those not yet in a batch go back to nsqd
        at the next :meth:`admit`."""
        if not self._draining:
            log.info("draining %s/%s", self.options.topic, self.options.channel)
            self._draining = True
            self._spread_rdy()

    def drained(self) -> bool:
        """Draining, and every message taken was committed (and FINed)."""
        return self._draining and self.ledger.released == self.ledger.received

    def received(self) -> int:
        return self.ledger.received

    @property
    def nsqd_addresses(self) -> list[str]:
        return sorted(self._conns)

    # -- TOUCH ----------------------------------------------------------------------
    def touch_interval(self) -> float:
        if self.options.touch_interval:
            return self.options.touch_interval
        timeouts = [int(c.server_settings.get("msg_timeout") or 0) for c in self._connections()]
        timeouts = [t for t in timeouts if t > 0]
        return min(timeouts) / 2000 if timeouts else DEFAULT_TOUCH_INTERVAL

    async def _touch_loop(self) -> None:
        while not self._closing:
            await asyncio.sleep(self.touch_interval())
            for conn, ids in self.ledger.held().by_conn().items():
                conn.touch_ids(ids)

    # -- stopping -------------------------------------------------------------------
    def _requeue(self, messages: Held[Connection]) -> None:
        for conn, ids in messages.by_conn().items():
            conn.requeue_ids(ids)

    async def close(self) -> None:
        """CLS, hand every held message back to nsqd (REQ without delay), close."""
        if self._closing:
            return
        self._closing = True
        if self._poller is not None:
            await self._poller.close()
        for task in list(self._tasks):
            task.cancel()
        conns = [c for conns in self._conns.values() for c in conns]
        for conn in conns:
            conn.start_close()  # CLS first: nsqd sends nothing more, not even what is handed back
        self._requeue(self.ledger.release_through(self.ledger.received))
        try:
            async with asyncio.timeout(CLOSE_TIMEOUT):
                await asyncio.gather(*(c.wait_closed() for c in conns))
        except TimeoutError:
            log.warning("nsqd did not close every connection within %ss after CLS", CLOSE_TIMEOUT)
        for conn in conns:
            conn.close()
