"""JSON from nsqd's and nsqlookupd's HTTP APIs over the standard library alone: what the
client's core needs (lookupd discovery, ``nsq_stat``), so that installing the client does
not bring an HTTP library. The full admin API (:mod:`nsq_client.admin`) uses aiohttp and
comes with the ``admin`` extra.

Each request is one HTTP/1.0 ``GET`` on a connection of its own: the server answers with
a ``Content-Length`` or closes the connection after the body, never chunks it, and the
body is read to its end.
"""
from __future__ import annotations

import asyncio
import json
import ssl
from typing import Any, Mapping
from urllib.parse import urlencode, urlsplit

from .errors import AdminError

# asks servers that still wrap answers in {"status_code", "data"} for the bare JSON
NSQ_ACCEPT = "application/vnd.nsq; version=1.0"
MAX_ANSWER = 64 << 20  # a /stats of many thousand channels stays far below


def base_url(address: str) -> str:
    """``host:port`` or a full ``http(s)://`` URL, as a URL without a trailing slash."""
    address = address.rstrip("/")
    return address if "://" in address else f"http://{address}"


def error_code(body: bytes) -> str:
    """NSQ's error code (``TOPIC_NOT_FOUND`` ...) from an error answer's body."""
    try:
        value = json.loads(body)
    except ValueError:
        return body.decode("utf-8", "replace").strip()
    if isinstance(value, dict):
        return str(value.get("message") or value.get("status_txt") or value)
    return str(value)


def unwrap(value: Any) -> Any:
    """The answer itself, from servers before the versioned API that wrap every answer."""
    if isinstance(value, dict) and "status_code" in value and "data" in value:
        return value["data"]
    return value


async def get_json(address: str, path: str, params: Mapping[str, object | None] | None = None, *,
                   timeout: float | None = 5.0, connect_timeout: float | None = None,
                   ssl_context: ssl.SSLContext | None = None) -> Any:
    """``GET`` ``path`` of the server at ``address`` and decode its JSON answer;
    ``timeout`` bounds the whole exchange, ``connect_timeout`` (when given) its connect.

    Raises :class:`AdminError` for a non-2xx answer or one that is not JSON,
    :class:`OSError` when the server cannot be reached or the connection breaks, and
    :class:`TimeoutError` when the whole exchange takes longer than ``timeout``."""
    url = base_url(address) + path
    query = urlencode({k: str(v) for k, v in (params or {}).items() if v is not None})
    target = urlsplit(url)
    async with asyncio.timeout(timeout):
        status, body = await _exchange(target.scheme, target.hostname or "", target.port,
                                       (target.path or "/") + (f"?{query}" if query else ""), target.netloc,
                                       ssl_context, connect_timeout)
    if not 200 <= status < 300:
        raise AdminError(status, error_code(body), url)
    try:
        return unwrap(json.loads(body))
    except ValueError:
        raise AdminError(status, f"answer is not JSON: {body[:100]!r}", url) from None


async def _exchange(scheme: str, host: str, port: int | None, target: str, netloc: str,
                    ssl_context: ssl.SSLContext | None, connect_timeout: float | None) -> tuple[int, bytes]:
    if scheme not in ("http", "https"):
        raise ValueError(f"not an http(s) URL: {scheme}://{netloc}")
    tls: ssl.SSLContext | None = None
    if scheme == "https":
        tls = ssl_context or ssl.create_default_context()
    async with asyncio.timeout(connect_timeout):
        reader, writer = await asyncio.open_connection(host, port or (443 if tls else 80), ssl=tls)
    try:
        request = (f"GET {target} HTTP/1.0\r\nHost: {netloc}\r\nAccept: {NSQ_ACCEPT}\r\n"
                   "User-Agent: nsq_client\r\nConnection: close\r\n\r\n")
        writer.write(request.encode("latin-1"))
        await writer.drain()
        chunks: list[bytes] = []
        size = 0
        while chunk := await reader.read(1 << 16):
            size += len(chunk)
            if size > MAX_ANSWER:
                raise ConnectionResetError(f"the answer is larger than {MAX_ANSWER} bytes")
            chunks.append(chunk)
    finally:
        writer.close()
    return parse_answer(b"".join(chunks))


def parse_answer(answer: bytes) -> tuple[int, bytes]:
    """(status, body) of a whole HTTP/1.x answer."""
    head, separator, body = answer.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    status_line = lines[0].split(None, 2)
    if not separator or len(status_line) < 2 or not status_line[0].startswith(b"HTTP/") or not status_line[1].isdigit():
        raise ConnectionResetError(f"not a whole HTTP answer: {answer[:100]!r}")
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        headers[name.strip().lower()] = value.strip()
    if headers.get(b"transfer-encoding", b"").lower() == b"chunked":
        body = _dechunk(body)
    elif (length := headers.get(b"content-length", b"")).isdigit():
        if len(body) < int(length):
            raise ConnectionResetError(f"the answer ended after {len(body)} of its {int(length)} bytes")
        body = body[:int(length)]
    return int(status_line[1]), body


def _dechunk(data: bytes) -> bytes:
    """A chunked body (a server may chunk even an HTTP/1.0 answer against the rules)."""
    out, position = bytearray(), 0
    while True:
        end = data.find(b"\r\n", position)
        if end < 0:
            raise ConnectionResetError("a chunked answer ended inside a chunk size")
        digits = data[position:end].split(b";")[0].strip()
        try:
            size = int(digits, 16)
        except ValueError:
            raise ConnectionResetError(f"not a chunk size: {digits[:20]!r}") from None
        if size == 0:
            return bytes(out)
        start = end + 2
        if start + size > len(data):
            raise ConnectionResetError("a chunked answer ended inside a chunk")
        out += data[start:start + size]
        position = start + size + 2
