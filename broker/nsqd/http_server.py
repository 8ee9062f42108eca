"""nsqd's HTTP/1.1 server: h11 parses requests (line, headers, Content-Length and chunked
bodies), asyncio streams carry the bytes.

One task per connection reads requests one after the other (keep-alive, pipelined
requests wait in h11's buffer), hands each to ``handle`` as an :class:`HttpRequest` and
writes the :class:`Reply` it returns. Only nsqd's needs are met, and only HTTP/1.x:

- bodies with Content-Length or chunked, read by the handler when it wants them (with a
  limit); ``Expect: 100-continue`` is answered when the handler starts reading;
- a body the handler left unread is skipped when it is small (up to ``DRAIN_LIMIT``),
  otherwise the answer closes the connection;
- a request h11 cannot parse is answered ``400 Bad Request`` (431 for oversized headers,
  505 for an HTTP version other than 1.0 and 1.1) in plain text, as Go's server does, and
  the connection is closed;
- answers always carry Content-Length (and Date, as Go's do) and are written in the
  request's HTTP version; an HTTP/1.0 request or ``Connection: close`` closes after it;
- every read waits at most ``idle_timeout`` (a connection between two requests, or a
  client that stops sending mid-request, is closed after it);
- ``close()``: listeners first, then idle connections, then requests still running get
  ``grace`` seconds to finish (each connection closes after its answer) before they are
  cancelled.
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
import time
from email.utils import formatdate
from http import HTTPStatus
from typing import AsyncIterator, Awaitable, Callable
from urllib.parse import unquote

import h11

from nsq_protocol.http_api import Reply

IDLE_TIMEOUT = 75.0  # seconds; aiohttp's keep-alive default, which nsqd had before
SHUTDOWN_GRACE = 60.0  # seconds running requests get to finish at close()
DRAIN_LIMIT = 256 * 1024  # unread body bytes skipped to keep a connection open
MAX_HEADER_BYTES = 64 * 1024  # a request line and headers still incomplete past this: 431
READ_SIZE = 256 * 1024
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


class HttpRequest:
    """One request as handlers see it. ``path`` is percent-decoded, ``query_string`` raw;
    header names are lower case (repeated headers joined with ", ")."""

    __slots__ = ("method", "target", "path", "query_string", "headers", "secure", "remote",
                 "content_length", "path_arg", "_connection")

    def __init__(self, method: str, target: str, headers: dict[str, str], secure: bool,
                 remote: str | None, connection: "_Connection") -> None:
        self.method = method
        self.target = target
        raw_path, _, self.query_string = target.partition("?")
        if raw_path.startswith(("http://", "https://")):  # absolute-form: keep the path
            slash = raw_path.find("/", raw_path.index("//") + 2)
            raw_path = raw_path[slash:] if slash >= 0 else "/"
        self.path = unquote(raw_path) if "%" in raw_path else raw_path
        self.headers = headers
        self.secure = secure
        self.remote = remote
        length = headers.get("content-length")
        self.content_length = int(length) if length is not None else None  # h11 checked it
        self.path_arg = ""  # what a route's variable part matched (``/config/<opt>``)
        self._connection = connection

    async def read_body(self, limit: int) -> bytes | None:
        """The whole body, or None when it is longer than ``limit`` bytes (then the rest
        is not read). Raises :class:`BodyUnreadable`."""
        if self.content_length is not None and self.content_length > limit:
            return None
        chunks: list[bytes] = []
        total = 0
        async for chunk in self._connection.body_chunks():
            total += len(chunk)
            if total > limit:
                return None
            chunks.append(chunk)
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)


Handle = Callable[[HttpRequest], Awaitable[Reply]]


class _Connection:
    """One client connection. h11 parses: a parser per request (h11 only starts a new
    cycle after its own framing of the answer), handed what the previous one had read
    beyond its request. Answers always carry Content-Length, so they are written here."""

    def __init__(self, server: "HttpServer", reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 secure: bool) -> None:
        self._server = server
        self._reader = reader
        self._writer = writer
        self._secure = secure
        peer = writer.get_extra_info("peername")
        self._remote = str(peer[0]) if isinstance(peer, tuple) and peer else None
        self._parser = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEADER_BYTES)
        self._version = b"1.1"  # the request's, which the answer uses (as Go's server does)
        self._between_requests = True
        self._body_done = True
        self._body_bytes = 0
        self._continue_sent = False
        self._unread_input = False

    @property
    def idle(self) -> bool:
        """Waiting for the first byte of a request: close() may drop it."""
        return self._between_requests and self._parser.their_state is h11.IDLE and not self._parser.trailing_data[0]

    async def run(self) -> None:
        try:
            while await self._serve_one():
                self._next_parser()
            if self._unread_input:
                await self._linger()
        except h11.RemoteProtocolError as e:  # in a request's head: nothing is answered yet
            with contextlib.suppress(OSError):
                await self._respond("", refusal(e.error_status_hint), close=True)
                await self._linger()
        except (OSError, TimeoutError, asyncio.IncompleteReadError):
            pass  # the peer went away, stalled, or broke off mid-request: nothing to answer
        finally:
            self._writer.close()

    async def _linger(self) -> None:
        """Closing with the client still sending (a body left unread, a request refused):
        stop writing, then read and drop what still comes for a moment, so the kernel does
        not reset the connection and lose the answer before the client read it."""
        try:
            if self._writer.can_write_eof():
                self._writer.write_eof()
            async with asyncio.timeout(LINGER):
                while await self._reader.read(READ_SIZE):
                    pass
        except (OSError, TimeoutError):
            pass

    def _next_parser(self) -> None:
        data, closed = self._parser.trailing_data
        self._parser = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEADER_BYTES)
        if data:
            self._parser.receive_data(bytes(data))
        if closed:
            self._parser.receive_data(b"")

    async def _serve_one(self) -> bool:
        """Read one request and answer it; whether the connection goes on."""
        event = await self._next_event(idle=True)
        if isinstance(event, h11.ConnectionClosed):
            return False
        assert isinstance(event, h11.Request)
        if event.http_version not in (b"1.0", b"1.1"):  # h11 takes any digit.digit
            raise h11.RemoteProtocolError("unsupported HTTP version", error_status_hint=505)
        self._between_requests = False
        request = self._request(event)
        self._version = event.http_version
        keep_alive = event.http_version == b"1.1" and not _asks_to_close(request.headers.get("connection"))
        self._body_done, self._body_bytes, self._continue_sent = False, 0, False
        reply = await self._server.handle(request)
        body_read = await self._finish_body(request)
        self._unread_input = not body_read
        keep_alive = body_read and keep_alive and not self._server.closing
        await self._respond(request.method, reply, close=not keep_alive)
        self._between_requests = True
        return keep_alive

    def _request(self, event: h11.Request) -> HttpRequest:
        headers: dict[str, str] = {}
        for name, value in event.headers:
            key, text = name.decode("latin-1"), value.decode("latin-1")
            headers[key] = f"{headers[key]}, {text}" if key in headers else text
        return HttpRequest(event.method.decode("ascii"), event.target.decode("latin-1"), headers,
                           self._secure, self._remote, self)

    async def _next_event(self, idle: bool = False) -> h11.Event:
        while True:
            event = self._parser.next_event()
            if event is h11.NEED_DATA:
                try:
                    async with asyncio.timeout(self._server.idle_timeout):
                        data = await self._reader.read(READ_SIZE)
                except TimeoutError:
                    if idle and self.idle:
                        return h11.ConnectionClosed()  # an idle keep-alive connection times out
                    raise
                self._parser.receive_data(data)
                continue
            assert event is not h11.PAUSED  # a parser reads one request only
            return event  # type: ignore[return-value]

    async def body_chunks(self) -> AsyncIterator[bytes]:
        """The request body as it arrives; sends 100 Continue first when it is awaited."""
        if self._body_done:
            return
        if self._parser.they_are_waiting_for_100_continue and not self._continue_sent:
            self._continue_sent = True
            await self._write(b"HTTP/1.1 100 Continue\r\n\r\n")
        try:
            while True:
                event = await self._next_event()
                if isinstance(event, h11.Data):
                    self._body_bytes += len(event.data)
                    yield bytes(event.data)
                elif isinstance(event, h11.EndOfMessage):
                    self._body_done = True
                    return
                else:  # ConnectionClosed mid-body
                    raise BodyUnreadable("the connection closed during the body")
        except (h11.RemoteProtocolError, TimeoutError, OSError) as e:
            raise BodyUnreadable(str(e) or type(e).__name__) from e

    async def _finish_body(self, request: HttpRequest) -> bool:
        """Skip what the handler left of the body when that is cheap; whether it is all
        read (False: the connection must close after the answer)."""
        if self._body_done:
            return True
        if self._parser.their_state is h11.ERROR:
            return False
        if self._parser.they_are_waiting_for_100_continue and not self._continue_sent:
            return False  # the client holds the body back until told to send it
        if request.content_length is not None and request.content_length - self._body_bytes > DRAIN_LIMIT:
            return False
        try:
            async for _ in self.body_chunks():
                if self._body_bytes > DRAIN_LIMIT:
                    return False
        except BodyUnreadable:
            return False
        return True

    async def _respond(self, method: str, reply: Reply, close: bool) -> None:
        head = "".join(f"{name}: {value}\r\n" for name, value in reply.headers.items()).encode("latin-1")
        parts = [b"HTTP/%s %d %s\r\n" % (self._version, reply.status, _reason(reply.status)), head,
                 b"Date: %s\r\nContent-Length: %d\r\n" % (_date.now(), len(reply.body)),
                 b"Connection: close\r\n\r\n" if close else b"\r\n"]
        if method != "HEAD":
            parts.append(reply.body)
        await self._write(b"".join(parts))

    async def _write(self, data: bytes) -> None:
        self._writer.write(data)
        await self._writer.drain()


def _asks_to_close(connection: str | None) -> bool:
    return connection is not None and any(token.strip().lower() == "close" for token in connection.split(","))


def refusal(status: int) -> Reply:
    """Go's answer to a request it cannot parse: the status and its reason in plain text
    (the connection then closes)."""
    return Reply(status, b"%d %s" % (status, _reason(status)), {"Content-Type": "text/plain; charset=utf-8"})


_REASONS = {status.value: status.phrase.encode() for status in HTTPStatus}


def _reason(status: int) -> bytes:
    return _REASONS.get(status, b"")


class HttpServer:
    """Listeners (plain and TLS) sharing one ``handle``; closed together by :meth:`close`."""

    def __init__(self, handle: Handle, *, idle_timeout: float = IDLE_TIMEOUT, logger: logging.Logger | None = None) -> None:
        self.handle = handle
        self.idle_timeout = idle_timeout
        self.closing = False
        self._log = logger or logging.getLogger("nsqd")
        self._listeners: list[asyncio.AbstractServer] = []
        self._connections: dict[asyncio.Task[None], _Connection] = {}

    async def listen(self, host: str | None, port: int, ssl_context: ssl.SSLContext | None = None) -> asyncio.AbstractServer:
        secure = ssl_context is not None

        async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            task = asyncio.current_task()
            assert task is not None
            connection = _Connection(self, reader, writer, secure)
            self._connections[task] = connection
            try:
                await connection.run()
            except Exception:
                self._log.exception("HTTP: connection failed")
            finally:
                del self._connections[task]

        listener = await asyncio.start_server(accept, host, port, ssl=ssl_context, reuse_address=True)
        self._listeners.append(listener)
        return listener

    def stop_listening(self) -> None:
        """No new connections; those open are still served."""
        for listener in self._listeners:
            listener.close()

    async def close(self, grace: float = SHUTDOWN_GRACE) -> None:
        self.closing = True
        self.stop_listening()
        await asyncio.sleep(0)  # connections accepted just before run their first step
        for task, connection in list(self._connections.items()):
            if connection.idle:
                task.cancel()
        running = list(self._connections)
        if running:
            _, late = await asyncio.wait(running, timeout=grace)
            for task in late:
                task.cancel()
            if late:
                await asyncio.wait(late)
