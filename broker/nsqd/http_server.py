"""nsqd's HTTP/1.1 server: an asyncio Protocol per connection, heads parsed by
``http_head`` (h11 judging any head out of the ordinary, and reading chunked bodies).

Bytes arrive in ``data_received`` into the connection's buffer; a complete head starts a
task that runs ``handle`` on an :class:`HttpRequest` and writes the :class:`Reply` it
returns, then the next request already buffered (pipelined) is served, or the connection
waits for one (keep-alive). There are no streams, no parser object per request and no
timer per read: one timer per connection checks, when it fires, how long the connection
has been waiting for input. A keep-alive client repeating its previous head (a publisher's
usual stream) may be answered straight from ``data_received``, with no task step, when the
server's ``handle_now`` can answer at once (``_serve_now``); anything it declines takes the
usual path. Only nsqd's needs are met, and only HTTP/1.x:

- bodies with Content-Length or chunked, read by the handler when it wants them (with a
  limit); ``Expect: 100-continue`` is answered when the handler starts reading;
- a body the handler left unread is skipped when it is small (up to ``DRAIN_LIMIT``),
  otherwise the answer closes the connection;
- a request that cannot be parsed is answered ``400 Bad Request`` (431 for oversized
  headers, 505 for an HTTP version other than 1.0 and 1.1, 501 for a transfer encoding
  other than chunked) in plain text, as Go's server does, and the connection is closed;
- answers always carry Content-Length (and Date, as Go's do) and are written in the
  request's HTTP version; an HTTP/1.0 request or ``Connection: close`` closes after it;
- waiting for input lasts at most ``idle_timeout`` (a connection between two requests,
  or a client that stops sending mid-request, is closed after it);
- ``close()``: listeners first, then idle connections, then requests still running get
  ``grace`` seconds to finish (each connection closes after its answer) before they are
  cancelled.
"""
from __future__ import annotations

import asyncio
import logging
import ssl
import time
from email.utils import formatdate
from http import HTTPStatus
from typing import Awaitable, Callable
from urllib.parse import unquote

import h11

from nsq_protocol.http_api import Reply

from .http_head import (
    CHUNKED,
    MAX_HEADER_BYTES,
    RequestHead,
    head_end,
    obviously_not_a_request,
    parse_head,
    refuse_incomplete,
)

IDLE_TIMEOUT = 75.0  # seconds; aiohttp's keep-alive default, which nsqd had before
SHUTDOWN_GRACE = 60.0  # seconds running requests get to finish at close()
DRAIN_LIMIT = 256 * 1024  # unread body bytes skipped to keep a connection open
READ_PAUSE = 1024 * 1024  # buffered input past which reading pauses until the request wants it
LINGER = 1.0  # seconds input is still read and dropped when closing on a client still sending


class BodyUnreadable(Exception):
    """The request body could not be read: malformed framing, a timeout or the peer gone.
    The handler's caller answers :func:`refusal` (400) and the connection closes."""


class _Date:
    """The Date header's value (RFC 7231's IMF-fixdate), formatted once a second."""

    def __init__(self) -> None:
        self._second = -1
        self._value = b""

    def now(self) -> bytes:
        second = int(time.time())
        if second != self._second:
            self._value = formatdate(second, usegmt=True).encode()
            self._second = second
        return self._value


_date = _Date()


def split_target(target: str) -> tuple[str, str]:
    """A request target's percent-decoded path and its raw query string (of an
    absolute-form target, only the path is kept)."""
    raw_path, _, query_string = target.partition("?")
    if raw_path.startswith(("http://", "https://")):  # absolute-form: keep the path
        slash = raw_path.find("/", raw_path.index("//") + 2)
        raw_path = raw_path[slash:] if slash >= 0 else "/"
    return (unquote(raw_path) if "%" in raw_path else raw_path), query_string


class HttpRequest:
    """One request as handlers see it. ``path`` is percent-decoded, ``query_string`` raw;
    header names are lower case (repeated headers joined with ", ")."""

    __slots__ = ("method", "target", "path", "query_string", "headers", "secure", "remote",
                 "content_length", "path_arg", "_connection")

    def __init__(self, head: RequestHead, secure: bool, remote: str | None, connection: "_Connection") -> None:
        self.method = head.method
        self.target = head.target
        self.path, self.query_string = split_target(head.target)
        self.headers = head.headers
        self.secure = secure
        self.remote = remote
        self.content_length = None if head.body_length == CHUNKED or "content-length" not in head.headers \
            else head.body_length
        self.path_arg = ""  # what a route's variable part matched (``/config/<opt>``)
        self._connection = connection

    async def read_body(self, limit: int) -> bytes | None:
        """The whole body, or None when it is longer than ``limit`` bytes (then the rest
        is not read). Raises :class:`BodyUnreadable`."""
        if self.content_length is not None and self.content_length > limit:
            return None
        connection = self._connection
        first = await connection.body_piece()
        if first is None:
            return b""
        if len(first) > limit:
            return None
        chunks = [first]
        total = len(first)
        while (piece := await connection.body_piece()) is not None:
            total += len(piece)
            if total > limit:
                return None
            chunks.append(piece)
        return first if len(chunks) == 1 else b"".join(chunks)


Handle = Callable[[HttpRequest], Awaitable[Reply]]
# the answer to a request whose body is all here, given at once when that can be done
# without waiting for anything; None (with nothing done) leaves the request to ``Handle``
HandleNow = Callable[[RequestHead, bytes, bool], "Reply | None"]


class _Connection(asyncio.Protocol):
    """One client connection: its input buffer, the request being served, and its body."""

    def __init__(self, server: "HttpServer", secure: bool) -> None:
        self._server = server
        self._on_input = server.on_input
        self._secure = secure
        self._loop = asyncio.get_running_loop()
        self._transport: asyncio.Transport | None = None
        self._remote: str | None = None
        self._buf = bytearray()
        self._eof = False
        self._lost = False
        self._lingering = False
        self._reading_paused = False
        self._version = b"1.1"  # the request's, which the answer uses (as Go's server does)
        self._task: asyncio.Task[None] | None = None  # serves the connection's requests in turn
        self._serving = False  # a request's head was read and it is not answered yet
        self._input: asyncio.Future[None] | None = None  # waiting for input (a head or a body)
        self._writable: asyncio.Future[None] | None = None  # the answer waits for the socket
        self._write_paused = False
        self._waiting_since = self._loop.time()
        self._timer: asyncio.TimerHandle | None = None
        self.closed: asyncio.Future[None] = self._loop.create_future()
        self._last_head_bytes = b""  # the previous head as received, and as parsed
        self._last_head: RequestHead | None = None
        self._now_head = b""  # the previous head, when requests repeating it may be answered at once
        # the body of the request being served
        self._head: RequestHead | None = None
        self._body_left = 0  # Content-Length bytes not yet taken
        self._chunked: h11.Connection | None = None  # reads a chunked body
        self._body_done = True
        self._body_bytes = 0
        self._continue_sent = False

    @property
    def idle(self) -> bool:
        """Waiting for the first byte of a request: close() may drop it."""
        return not self._serving and not self._buf and not self._lingering

    # -- asyncio.Protocol -----------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]
        peer = transport.get_extra_info("peername")
        self._remote = str(peer[0]) if isinstance(peer, tuple) and peer else None
        self._server._connections.add(self)
        self._arm_timer()
        self._task = self._loop.create_task(self._run())

    def data_received(self, data: bytes) -> None:
        if self._lingering:
            return
        if self._on_input is not None:
            self._on_input()
        self._waiting_since = self._loop.time()
        if self._now_head and not self._buf and not self._serving and self._input is not None \
                and not self._input.done():
            data = self._serve_now(data)  # whole requests repeating the previous head, answered here
            if not data:
                return
        self._buf += data
        waiter = self._input
        if waiter is not None:
            if not waiter.done():
                waiter.set_result(None)
        elif len(self._buf) > READ_PAUSE and not self._reading_paused and self._transport is not None:
            self._reading_paused = True  # resumed when the request being served wants input
            self._transport.pause_reading()

    def eof_received(self) -> bool:
        self._eof = True
        if self._lingering:
            self._close()
        elif self._input is not None and not self._input.done():
            self._input.set_result(None)
        return True  # the answer may still be written; the connection closes itself after it

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost = True
        self._server._connections.discard(self)
        if self._timer is not None:
            self._timer.cancel()
        for waiter in (self._input, self._writable):
            if waiter is not None and not waiter.done():
                waiter.set_result(None)
        if not self.closed.done():
            self.closed.set_result(None)

    def pause_writing(self) -> None:
        self._write_paused = True

    def resume_writing(self) -> None:
        self._write_paused = False
        if self._writable is not None and not self._writable.done():
            self._writable.set_result(None)

    # -- requests -------------------------------------------------------------
    async def _run(self) -> None:
        """Serve requests one after the other while the connection lasts (keep-alive,
        pipelined ones straight from the buffer)."""
        try:
            while not (self._lost or self._lingering):
                head = self._take_head()
                if head is not None:
                    if not await self._serve(head):
                        return
                elif self._lost or self._lingering:
                    return
                elif self._eof and not self._buf:
                    self._close()
                    return
                else:
                    await self._more_input()
        except asyncio.CancelledError:
            self._close()
            raise
        except BodyUnreadable:  # the idle timeout between requests or inside a head
            self._close()
        except Exception:
            self._server.log.exception("HTTP: connection failed")
            self._close()

    def _take_head(self) -> RequestHead | None:
        """The request at the front of the buffer, once its head is whole; None while it
        is not (or when it was refused: the connection then lingers)."""
        buf = self._buf
        if not buf:
            return None
        end = head_end(buf)
        if end < 0:
            if len(buf) > MAX_HEADER_BYTES or obviously_not_a_request(buf) or self._eof:
                self._refuse(refuse_incomplete(bytes(buf), self._eof))
            return None
        head_bytes = bytes(buf[:end])
        del buf[:end]
        if head_bytes == self._last_head_bytes:  # a keep-alive client repeating its request
            head = self._last_head  # type: ignore[assignment]
        else:
            try:
                head = parse_head(head_bytes)
            except h11.RemoteProtocolError as e:
                self._refuse(e)
                return None
            self._last_head_bytes, self._last_head = head_bytes, head
            self._now_head = head_bytes if self._server.handle_now is not None and _answerable_now(head) else b""
        if head.version not in (b"1.0", b"1.1"):  # h11 takes any digit.digit
            self._refuse(h11.RemoteProtocolError("unsupported HTTP version", error_status_hint=505))
            return None
        self._head = head
        self._body_bytes, self._continue_sent = 0, False
        if head.body_length == CHUNKED:
            self._chunked = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEADER_BYTES)
            self._chunked.receive_data(head_bytes)
            self._chunked.next_event()  # the head again: the parser now expects the body
            self._body_done = False
        else:
            self._chunked = None
            self._body_left = head.body_length
            self._body_done = not head.body_length
        return head

    def _serve_now(self, data: bytes) -> bytes:
        """The fast lane of a keep-alive client repeating its request (a publisher's
        usual stream), taken while the connection waits for a head with nothing buffered:
        each whole request at the front of ``data`` that repeats the previous head is
        answered from here, with no task step, when ``handle_now`` can answer it at once.
        What it leaves (another request, a part of one, one to wait for) is returned for
        the usual path. The answer is the same bytes the usual path writes: a request
        allowed here is HTTP/1.1, keeps the connection open, and its body is all read."""
        head_bytes = self._now_head
        head = self._last_head
        assert head is not None
        server, secure = self._server, self._secure
        handle_now = server.handle_now
        assert handle_now is not None
        head_size = len(head_bytes)
        size = head_size + head.body_length
        pos = 0
        while (len(data) - pos >= size and data.startswith(head_bytes, pos) and not self._write_paused
               and not server.closing and not self._lost):
            reply = handle_now(head, data[pos + head_size:pos + size], secure)
            if reply is None:
                break
            self._write_now(self._answer(head.method, reply, close=False))
            pos += size
        return data[pos:] if pos else data

    async def _serve(self, head: RequestHead) -> bool:
        """Answer one request; whether the connection goes on."""
        self._serving = True
        self._version = head.version
        keep_alive = head.version == b"1.1" and not _asks_to_close(head.headers.get("connection"))
        try:
            reply = await self._server.handle(HttpRequest(head, self._secure, self._remote, self))
            body_read = await self._finish_body()
            keep_alive = body_read and keep_alive and not self._server.closing
            await self._respond(head.method, reply, close=not keep_alive)
        except (OSError, ConnectionError):
            self._close()
            return False
        finally:
            self._serving = False
        if not keep_alive:
            if body_read:
                self._close()
            else:
                self._linger()
            return False
        self._waiting_since = self._loop.time()
        return True

    def _refuse(self, error: h11.RemoteProtocolError) -> None:
        """A request that cannot be parsed: nothing is answered yet, so the refusal is."""
        self._write_now(self._answer("", refusal(error.error_status_hint), close=True))
        self._linger()

    # -- the body ---------------------------------------------------------------
    async def body_piece(self) -> bytes | None:
        """The next piece of the request's body as it arrives; None once it is all read.
        Sends 100 Continue first when the client waits for it."""
        while not self._body_done:
            if self._chunked is not None:
                piece = self._chunked_piece()
                if piece is not None:
                    return piece
            elif len(self._buf) >= self._body_left or (self._buf and self._body_left > READ_PAUSE):
                return self._length_piece()  # the whole body in one piece, unless it is large
            elif self._waits_for_continue():
                self._continue_sent = True
                self._write_now(b"HTTP/1.1 100 Continue\r\n\r\n")
            if not self._body_done:
                await self._more_input()
        return None

    def _length_piece(self) -> bytes:
        buf = self._buf
        take = min(len(buf), self._body_left)
        piece = bytes(buf) if take == len(buf) else bytes(buf[:take])
        del buf[:take]
        self._body_left -= take
        self._body_bytes += take
        self._body_done = not self._body_left
        return piece

    def _chunked_piece(self) -> bytes | None:
        parser = self._chunked
        assert parser is not None
        if self._buf:
            parser.receive_data(bytes(self._buf))
            self._buf.clear()
        try:
            event = parser.next_event()
        except h11.RemoteProtocolError as e:
            raise BodyUnreadable(str(e)) from e
        if isinstance(event, h11.Data):
            self._body_bytes += len(event.data)
            return bytes(event.data)
        if isinstance(event, h11.EndOfMessage):
            self._body_done = True
            rest, _ = parser.trailing_data
            self._buf[:0] = rest  # the next request, pipelined
            self._chunked = None
            return None
        if parser.they_are_waiting_for_100_continue and not self._continue_sent:
            self._continue_sent = True
            self._write_now(b"HTTP/1.1 100 Continue\r\n\r\n")
        return None

    def _waits_for_continue(self) -> bool:
        head = self._head
        return (head is not None and head.expects_continue and self._chunked is None and not self._continue_sent
                and not self._body_bytes and not self._buf)

    async def _more_input(self) -> None:
        """Until more input arrives; BodyUnreadable when none will (closed, timed out)."""
        if self._lingering:
            raise BodyUnreadable("the connection is closing")
        if self._eof or self._lost:
            raise BodyUnreadable("the connection closed during the body")
        if self._reading_paused and self._transport is not None:
            self._reading_paused = False
            self._transport.resume_reading()
        self._waiting_since = self._loop.time()
        self._input = self._loop.create_future()
        try:
            await self._input
        finally:
            self._input = None
        if not self._buf and (self._eof or self._lost):
            raise BodyUnreadable("the connection closed during the body")

    async def _finish_body(self) -> bool:
        """Skip what the handler left of the body when that is cheap; whether it is all
        read (False: the connection must close after the answer)."""
        if self._body_done:
            return True
        if self._chunked is not None and self._chunked.their_state is h11.ERROR:
            return False
        if self._chunked is not None and self._chunked.they_are_waiting_for_100_continue and not self._continue_sent:
            return False
        if self._waits_for_continue():
            return False  # the client holds the body back until told to send it
        if self._chunked is None and self._body_left > DRAIN_LIMIT:
            return False
        try:
            while await self.body_piece() is not None:
                if self._body_bytes > DRAIN_LIMIT:
                    return False
        except BodyUnreadable:
            return False
        return True

    # -- output -----------------------------------------------------------------
    def _answer(self, method: str, reply: Reply, close: bool) -> bytes:
        if reply.__class__ is PrebuiltReply and not close and method != "HEAD" and self._version == b"1.1":
            return self._server.prebuilt_answer(reply)
        return _answer_bytes(self._version, method, reply, close, _date.now())

    async def _respond(self, method: str, reply: Reply, close: bool) -> None:
        self._write_now(self._answer(method, reply, close))
        if self._write_paused and not self._lost:
            self._writable = self._loop.create_future()
            try:
                await self._writable
            finally:
                self._writable = None

    def _write_now(self, data: bytes) -> None:
        if self._transport is not None and not self._lost:
            self._transport.write(data)

    # -- closing ----------------------------------------------------------------
    def _linger(self) -> None:
        """Closing with the client still sending (a body left unread, a request refused):
        stop writing, then read and drop what still comes for a moment, so the kernel does
        not reset the connection and lose the answer before the client read it."""
        transport = self._transport
        if transport is None or self._lost:
            return
        self._lingering = True
        self._buf.clear()
        if self._reading_paused:
            self._reading_paused = False
            transport.resume_reading()
        if self._eof:
            self._close()
            return
        if transport.can_write_eof():
            transport.write_eof()
        self._loop.call_later(LINGER, self._close)

    def _close(self) -> None:
        if self._transport is not None:
            self._transport.close()

    def cancel(self) -> None:
        """Close now, cancelling the request being served."""
        if self._task is not None:
            self._task.cancel()
        self._close()

    # -- the idle timeout -------------------------------------------------------
    def _arm_timer(self, at: float | None = None) -> None:
        due = self._waiting_since + self._server.idle_timeout if at is None else at
        self._timer = self._loop.call_at(due, self._check_idle)

    def _check_idle(self) -> None:
        """Input has been awaited for ``idle_timeout``: the connection closes (between
        requests, or a head that stopped coming), or the body being read fails."""
        self._timer = None
        if self._lost:
            return
        now = self._loop.time()
        if self._input is None:  # a handler at work, or lingering: no input awaited
            self._arm_timer(now + self._server.idle_timeout)
            return
        if now < self._waiting_since + self._server.idle_timeout:
            self._arm_timer()
            return
        if not self._input.done():  # a body fails; between requests or in a head, the connection closes
            self._input.set_exception(BodyUnreadable("no input for the idle timeout"))
        self._waiting_since = now
        self._arm_timer()


def _answerable_now(head: RequestHead) -> bool:
    """A head whose requests the fast lane may take: HTTP/1.1 keeping the connection open,
    a Content-Length body, no ``Expect: 100-continue``."""
    return (head.version == b"1.1" and head.body_length > 0 and not head.expects_continue
            and not _asks_to_close(head.headers.get("connection")))


def _asks_to_close(connection: str | None) -> bool:
    return connection is not None and any(token.strip().lower() == "close" for token in connection.split(","))


def _answer_bytes(version: bytes, method: str, reply: Reply, close: bool, date: bytes) -> bytes:
    head = "".join(f"{name}: {value}\r\n" for name, value in reply.headers.items()).encode("latin-1")
    parts = [b"HTTP/%s %d %s\r\n" % (version, reply.status, _reason(reply.status)), head,
             b"Date: %s\r\nContent-Length: %d\r\n" % (date, len(reply.body)),
             b"Connection: close\r\n\r\n" if close else b"\r\n"]
    if method != "HEAD":
        parts.append(reply.body)
    return b"".join(parts)


class PrebuiltReply(Reply):
    """A reply made once and never changed (such as a publish's ``OK``): the fast lane
    reuses its answer's bytes (``HttpServer.prebuilt_answer``)."""

    __slots__ = ()


def refusal(status: int) -> Reply:
    """Go's answer to a request it cannot parse: the status and its reason in plain text
    (the connection then closes)."""
    return Reply(status, b"%d %s" % (status, _reason(status)), {"Content-Type": "text/plain; charset=utf-8"})


_REASONS = {status.value: status.phrase.encode() for status in HTTPStatus}


def _reason(status: int) -> bytes:
    return _REASONS.get(status, b"")


class HttpServer:
    """Listeners (plain and TLS) sharing one ``handle``; closed together by :meth:`close`."""

    def __init__(self, handle: Handle, *, handle_now: HandleNow | None = None, idle_timeout: float = IDLE_TIMEOUT,
                 logger: logging.Logger | None = None, on_input: Callable[[], None] | None = None) -> None:
        self.handle = handle
        self.handle_now = handle_now
        self.on_input = on_input  # called on every read (nsqd's busy poller: see busy_poll.py)
        self._prebuilt: tuple[Reply, bytes, bytes] | None = None  # (reply, Date, its answer)
        self.idle_timeout = idle_timeout
        self.closing = False
        self.log = logger or logging.getLogger("nsqd")
        self._listeners: list[asyncio.AbstractServer] = []
        self._connections: set[_Connection] = set()

    def prebuilt_answer(self, reply: "PrebuiltReply") -> bytes:
        """The bytes of an HTTP/1.1 keep-alive answer (to any method but HEAD) with a
        reply that never changes (``PrebuiltReply``), built again only when the Date
        header does."""
        date = _date.now()
        cached = self._prebuilt
        if cached is not None and cached[0] is reply and cached[1] is date:
            return cached[2]
        answer = _answer_bytes(b"1.1", "POST", reply, False, date)
        self._prebuilt = (reply, date, answer)
        return answer

    async def listen(self, host: str | None, port: int, ssl_context: ssl.SSLContext | None = None) -> asyncio.AbstractServer:
        secure = ssl_context is not None
        listener = await asyncio.get_running_loop().create_server(
            lambda: _Connection(self, secure), host, port, ssl=ssl_context, reuse_address=True)
        self._listeners.append(listener)
        return listener

    def stop_listening(self) -> None:
        """No new connections; those open are still served."""
        for listener in self._listeners:
            listener.close()

    async def close(self, grace: float = SHUTDOWN_GRACE) -> None:
        self.closing = True
        self.stop_listening()
        await asyncio.sleep(0)  # connections accepted just before are made
        for connection in list(self._connections):
            if connection.idle:
                connection.cancel()
        running = {connection.closed: connection for connection in self._connections}
        if running:
            _, late = await asyncio.wait(running, timeout=grace)
            for waiter in late:
                running[waiter].cancel()  # type: ignore[index]
            if late:
                await asyncio.wait(late)
