"""How Go's nsqd and nsqlookupd answer HTTP (their ``http_api`` package and httprouter),
as pure functions: both of our servers build every answer here, so bodies, headers and
status codes are the same bytes as Go's.

- 200 with a string: the text as it is, ``text/plain; charset=utf-8`` (Go sniffs it);
  an empty string or None: an empty body and no Content-Type; anything else: compact JSON.
- any other status: ``{"message":"CODE"}``.
- a path with no route: 404 ``NOT_FOUND``; a route without the method: ``OPTIONS`` is 200
  with ``Allow``, any other method 405 ``METHOD_NOT_ALLOWED`` with ``Allow``.
- every answer carries ``X-NSQ-Content-Type: nsq; version=1.0``, except OPTIONS and the
  plain-text ones (``/ping``: its text with any status).

A handler returns data (or :class:`Reply` for an answer of its own, such as /metrics) and
raises :class:`HttpError` for NSQ's error codes. :func:`answer` applies all of this around
one request (nsqd's own h11 server calls it directly); :func:`middleware` is the same as
a layer on aiohttp's router, for nsqlookupd. It reads the request the way aiohttp presents
it (``match_info``'s ``http_exception`` and its ``allowed_methods``) and leaves building
the response to the server, so this package still does no I/O and imports no web framework.
"""
from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Collection, TypeVar

R = TypeVar("R")

JSON_TYPE = "application/json; charset=utf-8"
TEXT_TYPE = "text/plain; charset=utf-8"
NSQ_CONTENT_TYPE = {"X-NSQ-Content-Type": "nsq; version=1.0"}

# Go's encoding/json escapes these inside strings (HTML safety, JavaScript line breaks)
_GO_JSON_ESCAPES = str.maketrans({"<": "\\u003c", ">": "\\u003e", "&": "\\u0026",
                                  "\u2028": "\\u2028", "\u2029": "\\u2029"})


class HttpError(Exception):
    """An answer with NSQ's error code: ``HttpError(404, "TOPIC_NOT_FOUND")``."""

    def __init__(self, status: int, code: str) -> None:
        super().__init__(code)
        self.status = status
        self.code = code


@dataclass(frozen=True, slots=True)
class Reply:
    status: int
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)


def go_json(data: Any) -> bytes:
    """``json.Marshal``'s bytes: no spaces, UTF-8 as it is, ``<>&`` escaped."""
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False).translate(_GO_JSON_ESCAPES).encode()


def ok(data: Any) -> Reply:
    """A handler's result as Go's ``RespondV1`` sends it with status 200."""
    if isinstance(data, Reply):
        return data
    if data is None or data == "" or data == b"":
        return Reply(200, b"", dict(NSQ_CONTENT_TYPE))
    if isinstance(data, (str, bytes)):
        body = data.encode() if isinstance(data, str) else data
        return Reply(200, body, {"Content-Type": TEXT_TYPE, **NSQ_CONTENT_TYPE})
    return Reply(200, go_json(data), {"Content-Type": JSON_TYPE, **NSQ_CONTENT_TYPE})


def plain_text(status: int, text: str) -> Reply:
    """Go's ``PlainText`` answer (``/ping``): the text with any status, no JSON, no
    X-NSQ-Content-Type."""
    return Reply(status, text.encode(), {"Content-Type": TEXT_TYPE})


def error(status: int, code: str) -> Reply:
    return Reply(status, go_json({"message": code}), {"Content-Type": JSON_TYPE, **NSQ_CONTENT_TYPE})


def allow_header(methods: Collection[str]) -> str:
    """httprouter's ``Allow``: the route's methods and OPTIONS, sorted."""
    return ", ".join(sorted({*methods, "OPTIONS"}))


def unrouted(method: str, allowed: Collection[str] | None) -> Reply:
    """The answer when no handler takes the request: ``allowed`` is None for an unknown
    path, else the methods its route has."""
    if allowed is None:
        return error(404, "NOT_FOUND")
    if method == "OPTIONS":
        return Reply(200, b"", {"Allow": allow_header(allowed)})
    reply = error(405, "METHOD_NOT_ALLOWED")
    reply.headers["Allow"] = allow_header(allowed)
    return reply


async def answer(method: str, target: str, remote: str | None, log: logging.Logger,
                 call: Callable[[], Awaitable[Any]] | None,
                 allowed: Collection[str] | None = None) -> Reply:
    """The reply to one request. ``call`` runs the handler the router matched; None when
    none matched, ``allowed`` then being the path's methods (None: an unknown path).
    Each request is logged at debug level, as Go's servers log it."""
    started = time.perf_counter()
    if call is None:
        reply = unrouted(method, allowed)
    else:
        try:
            reply = ok(await call())
        except HttpError as e:
            reply = error(e.status, e.code)
        except Exception:
            log.exception("HTTP: %s %s failed", method, target)
            reply = error(500, "INTERNAL_ERROR")
    log.debug("%d %s %s (%s) %.3fms", reply.status, method, target, remote,
              (time.perf_counter() - started) * 1000)
    return reply


def middleware(log: logging.Logger, respond: Callable[[Reply], R]) -> Callable[[Any, Any], Awaitable[R]]:
    """An aiohttp middleware answering every request by Go's rules; ``respond`` turns a
    Reply into the framework's response (``web.Response(status=..., body=..., headers=...)``)."""
    async def handle(request: Any, handler: Callable[[Any], Awaitable[Any]]) -> R:
        failure = request.match_info.http_exception
        call = None if failure is not None else (lambda: handler(request))
        reply = await answer(request.method, request.path_qs, request.remote, log, call,
                             getattr(failure, "allowed_methods", None))
        return respond(reply)
    handle.__middleware_version__ = 1  # type: ignore[attr-defined]  # what aiohttp's @web.middleware marks
    return handle
