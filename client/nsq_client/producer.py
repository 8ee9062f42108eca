"""A producer: publishes to one nsqd over one connection, connected on first use.

Every publish is matched to nsqd's answer by order (nsqd answers a connection's commands
in the order it receives them), so many publishes can be in flight on one connection:
``publish()`` awaits its answer, ``publish_nowait()`` returns a future at once for
fire-and-collect pipelining. ``stop()`` fails whatever is still unanswered with
:class:`ProducerStoppedError` rather than leaving it hanging.

A publish that fails with :class:`NotConnectedError` never reached nsqd; one that fails
with :class:`ConnectionClosedError` may have: the connection ended before its answer came.
"""
from __future__ import annotations

import asyncio
from types import TracebackType
from typing import Any, Sequence

from nsq_protocol import OK
from nsq_protocol import commands as cmd
from nsq_protocol.names import is_valid_topic_name

from .config import Config
from .conn import Connection, ConnectionDelegate
from .errors import ConnectionClosedError, NotConnectedError, ProducerStoppedError, ServerError


def _check_topic(topic: str) -> None:
    if not is_valid_topic_name(topic):
        raise ValueError(f"invalid topic name {topic!r}")


def _check_body(body: bytes) -> None:
    if not isinstance(body, (bytes, bytearray, memoryview)):
        raise TypeError(f"a message body is bytes, not {type(body).__name__}")
    if len(body) == 0:
        raise ValueError("a message body cannot be empty")


class Producer:
    """Publishes to the one nsqd at ``address`` (``host:port`` of its TCP port), over one
    connection opened on first use and reopened after a loss. Use it as ``async with``,
    or call :meth:`stop` when done."""

    def __init__(self, address: str, config: Config | None = None) -> None:
        self.address = address
        self.config = (config or Config()).model_copy()
        self._conn: Connection | None = None
        # connections whose writing failed, still reading nsqd's last answers (conn.py)
        self._leaving: set[Connection] = set()
        self._connecting: asyncio.Future[Connection] | None = None
        self._backlog: list[tuple[bytes, asyncio.Future[None]]] = []  # waiting for the connection
        self._pending: set[asyncio.Future[None]] = set()
        self._stopped = False

    def __repr__(self) -> str:
        return f"Producer({self.address})"

    @property
    def is_connected(self) -> bool:
        """Whether the connection to nsqd is open now."""
        return self._conn is not None and self._conn.is_connected

    @property
    def is_stopped(self) -> bool:
        """Whether :meth:`stop` was called."""
        return self._stopped

    @property
    def pending_count(self) -> int:
        """Publishes sent (or about to be) that nsqd has not answered yet."""
        return len(self._pending)

    # -- connection ----------------------------------------------------------------------
    async def connect(self) -> None:
        """Connect now (publishing connects by itself when needed)."""
        await self._connection()

    async def _connection(self) -> Connection:
        if self._stopped:
            raise ProducerStoppedError(f"{self.address}: producer stopped")
        conn = self._conn
        if conn is not None and conn.is_connected:
            return conn
        return await asyncio.shield(self._start_connecting())

    def _start_connecting(self) -> asyncio.Future[Connection]:
        """One connection attempt at a time, however many publishes wait for it."""
        if self._connecting is None:
            self._connecting = asyncio.ensure_future(self._establish())
            self._connecting.add_done_callback(_retrieve)
        return self._connecting

    async def _establish(self) -> Connection:
        try:
            conn = Connection(self.address, self.config, _ProducerEvents(self))
            await conn.connect()
            if self._stopped:
                conn.close()
                raise ProducerStoppedError(f"{self.address}: producer stopped")
        except BaseException as err:
            self._connecting = None
            error = err if isinstance(err, Exception) else ProducerStoppedError(f"{self.address}: producer stopped")
            waiting, self._backlog = self._backlog, []
            for _, answer in waiting:
                if not answer.done():
                    answer.set_exception(error)
            raise
        self._connecting = None
        if self._conn is not None and not self._conn.is_closed:
            self._leaving.add(self._conn)
        self._conn = conn
        waiting, self._backlog = self._backlog, []
        for command, answer in waiting:  # in the order they were submitted
            if not answer.done():
                self._send(conn, command, answer)
        return conn

    def _on_close(self, conn: Connection, reason: BaseException | None) -> None:
        if self._conn is conn:
            self._conn = None
        self._leaving.discard(conn)

    async def ping(self) -> None:
        """Connect if needed and send NOP (nsqd does not answer it; a broken connection
        shows as an error here)."""
        conn = await self._connection()
        conn.send(cmd.nop())
        await conn.drain()

    # -- publishing --------------------------------------------------------------------
    async def publish(self, topic: str, body: bytes) -> None:
        """Publish ``body`` to ``topic`` and wait for nsqd's OK; nsqd's refusal raises
        :class:`ServerError` with its code (``E_BAD_TOPIC`` ...)."""
        await self.publish_nowait(topic, body)

    async def multi_publish(self, topic: str, bodies: Sequence[bytes]) -> None:
        """Publish ``bodies`` to ``topic`` in one MPUB (all or none) and wait for nsqd's OK."""
        await self.multi_publish_nowait(topic, bodies)

    async def deferred_publish(self, topic: str, delay: float, body: bytes) -> None:
        """Publish ``body`` to be delivered after ``delay`` seconds."""
        await self.deferred_publish_nowait(topic, delay, body)

    def publish_nowait(self, topic: str, body: bytes) -> asyncio.Future[None]:
        """Send the publish now and return a future of nsqd's answer, for pipelining."""
        _check_topic(topic)
        _check_body(body)
        return self._submit(cmd.pub(topic, bytes(body)))

    def multi_publish_nowait(self, topic: str, bodies: Sequence[bytes]) -> asyncio.Future[None]:
        """Send the MPUB now and return a future of nsqd's answer."""
        _check_topic(topic)
        if not bodies:
            raise ValueError("multi_publish needs at least one body")
        for body in bodies:
            _check_body(body)
        return self._submit(cmd.mpub(topic, [bytes(b) for b in bodies]))

    def deferred_publish_nowait(self, topic: str, delay: float, body: bytes) -> asyncio.Future[None]:
        """Send a DPUB (delivered after ``delay`` seconds) now and return a future of nsqd's answer."""
        _check_topic(topic)
        _check_body(body)
        if delay < 0:
            raise ValueError(f"delay must be >= 0, got {delay}")
        return self._submit(cmd.dpub(topic, round(delay * 1000), bytes(body)))

    def _submit(self, command: bytes) -> asyncio.Future[None]:
        """Send ``command`` (connecting first if needed); the future resolves with nsqd's
        OK or fails with its error."""
        if self._stopped:
            raise ProducerStoppedError(f"{self.address}: producer stopped")
        answer: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._pending.add(answer)
        answer.add_done_callback(self._pending.discard)
        conn = self._conn
        if conn is not None and conn.is_connected:
            self._send(conn, command, answer)
        else:
            self._backlog.append((command, answer))
            self._start_connecting()
        return answer

    def _send(self, conn: Connection, command: bytes, answer: asyncio.Future[None]) -> None:
        try:
            reply = conn.request(command)
        except NotConnectedError as err:
            answer.set_exception(err)
            return
        reply.add_done_callback(lambda r: _settle(r, answer))

    # -- stopping ----------------------------------------------------------------------------
    async def stop(self) -> None:
        """Close the connection; publishes still waiting for nsqd fail with
        :class:`ProducerStoppedError`. Later publishes raise it too."""
        if self._stopped:
            return
        self._stopped = True
        error = ProducerStoppedError(f"{self.address}: producer stopped before nsqd answered")
        for answer in list(self._pending):
            if not answer.done():
                answer.set_exception(error)
        self._backlog = []
        if self._connecting is not None:
            self._connecting.cancel()
        conns = [*self._leaving, *([self._conn] if self._conn is not None else [])]
        self._conn = None
        for conn in conns:
            conn.close()
        await asyncio.gather(*(conn.wait_closed() for conn in conns))

    async def __aenter__(self) -> "Producer":
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.stop()


def _retrieve(future: asyncio.Future[Any]) -> None:
    """Mark a connection attempt's failure as seen: the publishes it failed report it."""
    if not future.cancelled():
        future.exception()


def _settle(reply: asyncio.Future[bytes], answer: asyncio.Future[Any]) -> None:
    if reply.cancelled():
        if not answer.done():
            answer.set_exception(ConnectionClosedError("the command was abandoned"))
        return
    error = reply.exception()  # always retrieved, so a reply nobody waits for is not reported
    if answer.done():
        return
    if error is not None:
        answer.set_exception(error)
    elif reply.result() != OK:
        answer.set_exception(ServerError("E_INVALID", f"unexpected answer {reply.result()[:100]!r}"))
    else:
        answer.set_result(None)


class _ProducerEvents(ConnectionDelegate):
    """A producer's connection reports its close through this, off the producer's public
    surface."""

    def __init__(self, producer: Producer) -> None:
        self._producer = producer

    def on_close(self, conn: Connection, reason: BaseException | None) -> None:
        self._producer._on_close(conn, reason)
