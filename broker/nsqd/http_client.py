"""nsqd's outgoing HTTP/1.1 (lookupd's /channels, the auth server, a drain's handoff to
other nsqds): h11 frames, asyncio streams carry the bytes, so an nsqd never loads aiohttp.

Each request is bounded by ``request_timeout`` in all (connecting included) and its
connect by ``connect_timeout``. Connections are kept alive and reused per
scheme/host/port (a handoff sends thousands of requests to one target); a reused
connection the server closed meanwhile is replaced once, for a request it never answered.
Every failure (refused, reset, timed out, unparseable answer) is an :class:`HttpClientError`.
"""
from __future__ import annotations

import asyncio
import json
import ssl
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode, urlsplit

import h11

READ_SIZE = 256 * 1024
MAX_ANSWER_BYTES = 64 * 1024 * 1024
IDLE_KEPT = 4  # idle connections kept per host


class HttpClientError(Exception):
    """A request that got no answer: refused, reset, timed out, or not HTTP."""


class _ClosedUnanswered(ConnectionResetError):
    """The server closed the connection before any byte of an answer."""


@dataclass(frozen=True)
class HttpAnswer:
    status: int
    body: bytes
    headers: dict[str, str] = field(default_factory=dict)  # names in lower case

    def json(self) -> Any:
        return json.loads(self.body)


_Key = tuple[str, str, int]  # scheme, host, port


class _Connection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.h11 = h11.Connection(h11.CLIENT)

    def close(self) -> None:
        self.writer.close()

    async def exchange(self, request: h11.Request, body: bytes) -> tuple[HttpAnswer, bool]:
        """Send one request and read its answer; whether the connection may be reused."""
        data = self.h11.send(request)
        if body:
            data += self.h11.send(h11.Data(data=body))
        data += self.h11.send(h11.EndOfMessage())
        self.writer.write(data)
        await self.writer.drain()
        response: h11.Response | None = None
        chunks: list[bytes] = []
        size = 0
        while True:
            event = self.h11.next_event()
            if event is h11.NEED_DATA:
                try:
                    data = await self.reader.read(READ_SIZE)
                except ConnectionResetError:
                    data = b""
                if not data and response is None:
                    raise _ClosedUnanswered("the server closed the connection without an answer")
                self.h11.receive_data(data)
            elif isinstance(event, h11.Response):
                response = event
            elif isinstance(event, h11.Data):
                size += len(event.data)
                if size > MAX_ANSWER_BYTES:
                    raise HttpClientError(f"answer longer than {MAX_ANSWER_BYTES} bytes")
                chunks.append(bytes(event.data))
            elif isinstance(event, h11.EndOfMessage):
                break
            # InformationalResponse (100 Continue): wait for the final answer
        assert response is not None
        headers = {name.decode("latin-1"): value.decode("latin-1") for name, value in response.headers}
        reusable = self.h11.our_state is h11.DONE and self.h11.their_state is h11.DONE
        if reusable:
            self.h11.start_next_cycle()
        return HttpAnswer(response.status_code, b"".join(chunks), headers), reusable


class HttpClient:
    """Requests to any number of servers, with their keep-alive connections."""

    def __init__(self, *, connect_timeout: float, request_timeout: float,
                 ssl_context: ssl.SSLContext | None = None, user_agent: str = "nsqd") -> None:
        """``ssl_context``: what https:// servers are verified with (None: the system's CAs)."""
        self.connect_timeout = connect_timeout
        self.request_timeout = request_timeout
        self._ssl = ssl_context
        self._user_agent = user_agent
        self._idle: dict[_Key, list[_Connection]] = {}

    async def request(self, method: str, url: str, *, params: dict[str, str] | None = None,
                      body: bytes = b"", headers: dict[str, str] | None = None) -> HttpAnswer:
        """``url`` is ``http(s)://host[:port]/path[?query]``; ``params`` are added to its query."""
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise HttpClientError(f"not an http(s) URL: {url!r}")
        try:
            port = parts.port or (443 if parts.scheme == "https" else 80)
        except ValueError as e:
            raise HttpClientError(f"bad port in {url!r}: {e}") from None
        key: _Key = (parts.scheme, parts.hostname, port)
        target = parts.path or "/"
        query = "&".join(q for q in (parts.query, urlencode(params) if params else "") if q)
        if query:
            target += "?" + query
        host_header = parts.netloc.rpartition("@")[2]
        all_headers = [("Host", host_header), ("User-Agent", self._user_agent)]
        all_headers += list((headers or {}).items())
        if body or method in ("POST", "PUT"):
            all_headers.append(("Content-Length", str(len(body))))
        request = h11.Request(method=method, target=target, headers=all_headers)
        try:
            async with asyncio.timeout(self.request_timeout):
                return await self._send(key, request, body)
        except TimeoutError:
            raise HttpClientError(f"{method} {url}: no answer within {self.request_timeout:g}s") from None
        except (OSError, h11.ProtocolError, asyncio.IncompleteReadError) as e:
            raise HttpClientError(f"{method} {url}: {e or type(e).__name__}") from None

    async def _send(self, key: _Key, request: h11.Request, body: bytes) -> HttpAnswer:
        idle = self._idle.get(key)
        while idle:
            connection = idle.pop()
            try:
                return await self._exchange(key, connection, request, body)
            except (ConnectionResetError, BrokenPipeError):
                continue  # closed by the server while it sat idle: the next one, or a new one
        connection = await self._connect(key)
        return await self._exchange(key, connection, request, body)

    async def _exchange(self, key: _Key, connection: _Connection, request: h11.Request, body: bytes) -> HttpAnswer:
        try:
            answer, reusable = await connection.exchange(request, body)
        except BaseException:
            connection.close()
            raise
        idle = self._idle.setdefault(key, [])
        if reusable and len(idle) < IDLE_KEPT:
            idle.append(connection)
        else:
            connection.close()
        return answer

    async def _connect(self, key: _Key) -> _Connection:
        scheme, host, port = key
        context: ssl.SSLContext | None = None
        if scheme == "https":
            context = self._ssl or ssl.create_default_context()
        try:
            async with asyncio.timeout(self.connect_timeout):
                reader, writer = await asyncio.open_connection(host, port, ssl=context)
        except TimeoutError:
            raise HttpClientError(f"connecting to {host}:{port}: no answer within {self.connect_timeout:g}s") from None
        return _Connection(reader, writer)

    async def close(self) -> None:
        idle, self._idle = self._idle, {}
        for connections in idle.values():
            for connection in connections:
                connection.close()
