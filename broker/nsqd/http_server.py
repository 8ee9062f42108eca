"""nsqd's HTTP/1.1 server: h11 parses and frames, asyncio streams carry the bytes.

One task per connection reads requests one after the other (keep-alive, pipelined
requests wait in h11's buffer), hands each to ``handle`` as an :class:`HttpRequest` and
writes the :class:`Reply` it returns. Only nsqd's needs are met, and only HTTP/1.x:

- bodies with Content-Length or chunked, read by the handler when it wants them (with a
  limit); ``Expect: 100-continue`` is answered when the handler starts reading;
- a body the handler left unread is skipped when it is small (up to ``DRAIN_LIMIT``),
  otherwise the answer closes the connection;
- a request h11 cannot parse is answered ``400 Bad Request`` (431 for oversized headers)
  in plain text, as Go's server does, and the connection is closed;
- every read waits at most ``idle_timeout`` (a connection between two requests, or a
  client that stops sending mid-request, is closed after it);
- ``close()``: listeners first, then idle connections, then requests still running get
  ``grace`` seconds to finish (each connection closes after its answer) before they are
  cancelled.
"""
from __future__ import annotations

import asyncio
import logging
import ssl
import time
from http import HTTPStatus
from typing import AsyncIterator, Awaitable, Callable
from urllib.parse import unquote

import h11

from nsq_protocol.http_api import Reply

IDLE_TIMEOUT = 75.0  # seconds; aiohttp's keep-alive default, which nsqd had before
SHUTDOWN_GRACE = 60.0  # seconds running requests get to finish at close()
DRAIN_LIMIT = 256 * 1024  # unread body bytes skipped to keep a connection open
MAX_HEADER_BYTES = 64 * 1024  # request line and headers together
READ_SIZE = 256 * 1024

_WEEKDAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


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
            t = time.gmtime(second)
            self._value = (f"{_WEEKDAYS[t.tm_wday]}, {t.tm_mday:02d} {_MONTHS[t.tm_mon - 1]} {t.tm_year} "
                           f"{t.tm_hour:02d}:{t.tm_min:02d}:{t.tm_sec:02d} GMT").encode()
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
    def __init__(self, server: "HttpServer", reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 secure: bool) -> None:
        self._server = server
        self._reader = reader
        self._writer = writer
        self._secure = secure
        peer = writer.get_extra_info("peername")
        self._remote = str(peer[0]) if isinstance(peer, tuple) and peer else None
        self._h11 = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEADER_BYTES)
        self._between_requests = True
        self._body_done = True
        self._body_bytes = 0

    @property
    def idle(self) -> bool:
        """Waiting for the first byte of a request: close() may drop it."""
        return self._between_requests and self._h11.their_state is h11.IDLE and not self._h11.trailing_data[0]

    async def run(self) -> None:
        try:
            while await self._serve_one():
                self._h11.start_next_cycle()
        except h11.RemoteProtocolError as e:
            if self._h11.our_state in (h11.IDLE, h11.SEND_RESPONSE):
                await self._respond("", refusal(e.error_status_hint), close=True)
        except (OSError, TimeoutError, asyncio.IncompleteReadError, h11.LocalProtocolError):
            pass  # the peer went away, stalled, or broke off mid-request: nothing to answer
        finally:
            self._writer.close()

    async def _serve_one(self) -> bool:
        """Read one request and answer it; whether the connection goes on."""
        event = await self._next_event(idle=True)
        if isinstance(event, h11.ConnectionClosed):
            return False
        assert isinstance(event, h11.Request)
        self._between_requests = False
        request = self._request(event)
        self._body_done, self._body_bytes = False, 0
        reply = await self._server.handle(request)
        close = not await self._finish_body(request) or self._server.closing
        await self._respond(request.method, reply, close)
        self._between_requests = True
        return self._h11.our_state is h11.DONE and self._h11.their_state is h11.DONE

    def _request(self, event: h11.Request) -> HttpRequest:
        headers: dict[str, str] = {}
        for name, value in event.headers:
            key, text = name.decode("latin-1"), value.decode("latin-1")
            headers[key] = f"{headers[key]}, {text}" if key in headers else text
        return HttpRequest(event.method.decode("ascii"), event.target.decode("latin-1"), headers,
                           self._secure, self._remote, self)

    async def _next_event(self, idle: bool = False) -> h11.Event:
        while True:
            event = self._h11.next_event()
            if event is h11.NEED_DATA:
                try:
                    async with asyncio.timeout(self._server.idle_timeout):
                        data = await self._reader.read(READ_SIZE)
                except TimeoutError:
                    if idle and self.idle:
                        return h11.ConnectionClosed()  # an idle keep-alive connection times out
                    raise
                self._h11.receive_data(data)
                continue
            if event is h11.PAUSED:  # pipelined data behind a request not yet answered
                raise h11.LocalProtocolError("paused")
            return event  # type: ignore[return-value]

    async def body_chunks(self) -> AsyncIterator[bytes]:
        """The request body as it arrives; sends 100 Continue first when it is awaited."""
        if self._body_done:
            return
        if self._h11.they_are_waiting_for_100_continue:
            await self._write(self._h11.send(h11.InformationalResponse(status_code=100, headers=[], reason=b"Continue")))
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
        if self._h11.they_are_waiting_for_100_continue or self._h11.their_state is h11.ERROR:
            return False
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
        headers = [(name.encode("latin-1"), value.encode("latin-1")) for name, value in reply.headers.items()]
        headers.append((b"Date", _date.now()))
        headers.append((b"Content-Length", b"%d" % len(reply.body)))
        if close:
            headers.append((b"Connection", b"close"))
        head = self._h11.send(h11.Response(status_code=reply.status, headers=headers,
                                           reason=_reason(reply.status)))
        if self._h11.their_http_version == b"1.0":
            head = b"HTTP/1.0" + head[8:]  # h11 writes 1.1; answer in the client's version, as Go does
        parts = [head]
        if method != "HEAD" and reply.body:
            parts.append(self._h11.send(h11.Data(data=reply.body)))
        parts.append(self._h11.send(h11.EndOfMessage()))
        await self._write(b"".join(parts))

    async def _write(self, data: bytes) -> None:
        self._writer.write(data)
        await self._writer.drain()


def refusal(status: int) -> Reply:
    """Go's answer to a request it cannot parse: the status and its reason in plain text
    (the connection then closes)."""
    return Reply(status, b"%d %s" % (status, _reason(status)), {"Content-Type": "text/plain; charset=utf-8"})


def _reason(status: int) -> bytes:
    try:
        return HTTPStatus(status).phrase.encode()
    except ValueError:
        return b""


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
