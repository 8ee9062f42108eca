"""lookupd's HTTP API, with Go lookupd's routes, JSON shapes and status codes.

Answers: 200 with JSON (or ``OK`` for /ping, or an empty body for actions); errors are
``{"message": "CODE"}`` with their status. Unknown paths are 404 NOT_FOUND, known paths
with another method 405 METHOD_NOT_ALLOWED. The ``Accept: application/vnd.nsq;
version=1.0`` header that pynsq sends gets the same JSON as any other request.
"""
from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from typing import Any, Callable

from aiohttp import web

from nsq_protocol.http_query import QueryError, first, parse_query
from nsq_protocol.names import is_valid_channel_name, is_valid_topic_name
from nsq_protocol.prometheus import CONTENT_TYPE

from . import metrics
from .registry import Registry

JSON_TYPE = "application/json; charset=utf-8"
TEXT_TYPE = "text/plain; charset=utf-8"
NSQ_CONTENT_TYPE = ("X-NSQ-Content-Type", "nsq; version=1.0")


class HttpError(Exception):
    def __init__(self, status: int, code: str) -> None:
        super().__init__(code)
        self.status = status
        self.code = code


@dataclass(frozen=True, slots=True)
class PlainText:
    text: str


@dataclass(frozen=True, slots=True)
class MetricsText:
    text: str


Params = dict[str, list[str]]
Handler = Callable[[Params], Any]


class LookupdHttpApi:
    """The request handlers; ``clock`` is the registry's monotonic clock."""

    def __init__(self, registry: Registry, version: str, logger: logging.Logger,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.registry = registry
        self.version = version
        self.log = logger
        self.clock = clock
        self.routes: dict[str, dict[str, Handler]] = {
            "/ping": {"GET": self.ping},
            "/info": {"GET": self.info},
            "/debug": {"GET": self.debug},
            "/lookup": {"GET": self.lookup},
            "/topics": {"GET": self.topics},
            "/channels": {"GET": self.channels},
            "/nodes": {"GET": self.nodes},
            "/topic/create": {"POST": self.create_topic},
            "/topic/delete": {"POST": self.delete_topic},
            "/channel/create": {"POST": self.create_channel},
            "/channel/delete": {"POST": self.delete_channel},
            "/topic/tombstone": {"POST": self.tombstone_topic_producer},
            "/metrics": {"GET": self.metrics},
        }

    # -- the aiohttp side ----------------------------------------------------
    def application(self) -> web.Application:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self.dispatch)
        return app

    async def dispatch(self, request: web.Request) -> web.StreamResponse:
        started = time.perf_counter()
        response = self._respond(request)
        self.log.debug("%d %s %s (%s) %.3fms", response.status, request.method, request.path_qs,
                       request.remote, (time.perf_counter() - started) * 1000)
        return response

    def _respond(self, request: web.Request) -> web.Response:
        methods = self.routes.get(request.path)
        if methods is None:
            return error_response(404, "NOT_FOUND")
        allowed = ", ".join(sorted([*methods, "OPTIONS"]))
        if request.method == "OPTIONS":
            return web.Response(status=200, headers={"Allow": allowed})
        handler = methods.get(request.method)
        if handler is None:
            response = error_response(405, "METHOD_NOT_ALLOWED")
            response.headers["Allow"] = allowed
            return response
        try:
            params = parse_query(request.rel_url.raw_query_string)
        except QueryError:
            return error_response(400, "INVALID_REQUEST")
        try:
            return ok_response(handler(params))
        except HttpError as e:
            return error_response(e.status, e.code)

    # -- handlers ------------------------------------------------------------
    def ping(self, params: Params) -> PlainText:
        return PlainText("OK")

    def info(self, params: Params) -> dict[str, Any]:
        return {"version": self.version}

    def lookup(self, params: Params) -> dict[str, Any]:
        topic = _required(params, "topic")
        found = self.registry.lookup(topic, self.clock())
        if found is None:
            raise HttpError(404, "TOPIC_NOT_FOUND")
        return {"channels": found.channels, "producers": [p.to_json() for p in found.producers]}

    def topics(self, params: Params) -> dict[str, Any]:
        return {"topics": self.registry.topics()}

    def channels(self, params: Params) -> dict[str, Any]:
        return {"channels": self.registry.channels(_required(params, "topic"))}

    def nodes(self, params: Params) -> dict[str, Any]:
        return {"producers": [
            {**node.info.to_json(), "tombstones": node.tombstones, "topics": node.topics}
            for node in self.registry.nodes(self.clock())
        ]}

    def create_topic(self, params: Params) -> None:
        topic = _required(params, "topic")
        if not is_valid_topic_name(topic):
            raise HttpError(400, "INVALID_ARG_TOPIC")
        self.log.info("DB: adding topic(%s)", topic)
        self.registry.create_topic(topic)

    def delete_topic(self, params: Params) -> None:
        topic = _required(params, "topic")
        self.log.info("DB: removing topic(%s)", topic)
        self.registry.delete_topic(topic)

    def create_channel(self, params: Params) -> None:
        topic, channel = _topic_channel(params)
        self.log.info("DB: adding channel(%s) in topic(%s)", channel, topic)
        self.registry.create_channel(topic, channel)

    def delete_channel(self, params: Params) -> None:
        topic, channel = _topic_channel(params)
        if not self.registry.delete_channel(topic, channel):
            raise HttpError(404, "CHANNEL_NOT_FOUND")
        self.log.info("DB: removed channel(%s) in topic(%s)", channel, topic)

    def tombstone_topic_producer(self, params: Params) -> None:
        topic = _required(params, "topic")
        node = _required(params, "node", "MISSING_ARG_NODE")
        self.log.info("DB: setting tombstone for producer@%s of topic(%s)", node, topic)
        self.registry.tombstone(topic, node, self.clock())

    def metrics(self, params: Params) -> MetricsText:
        """Beyond NSQ: producers, topics and channels for Prometheus."""
        return MetricsText(metrics.render(self.registry, self.version, self.clock()))

    def debug(self, params: Params) -> dict[str, Any]:
        """Every registration and its producers, with times in Unix nanoseconds."""
        to_wall_ns = _wall_clock_ns(self.clock)
        data: dict[str, list[dict[str, Any]]] = {}
        for entry in self.registry.debug_entries():
            info = entry.info
            data.setdefault(":".join(entry.registration), []).append({
                "id": info.id, "hostname": info.hostname, "broadcast_address": info.broadcast_address,
                "tcp_port": info.tcp_port, "http_port": info.http_port, "version": info.version,
                "last_update": to_wall_ns(entry.last_seen),
                "tombstoned": entry.tombstoned_at is not None,
                "tombstoned_at": 0 if entry.tombstoned_at is None else to_wall_ns(entry.tombstoned_at),
            })
        return data


def _required(params: Params, key: str, code: str | None = None) -> str:
    value = first(params, key)
    if value is None:
        raise HttpError(400, code or f"MISSING_ARG_{key.upper()}")
    return value


def _topic_channel(params: Params) -> tuple[str, str]:
    topic = _required(params, "topic")
    if not is_valid_topic_name(topic):
        raise HttpError(400, "INVALID_ARG_TOPIC")
    channel = _required(params, "channel")
    if not is_valid_channel_name(channel):
        raise HttpError(400, "INVALID_ARG_CHANNEL")
    return topic, channel


def _wall_clock_ns(clock: Callable[[], float]) -> Callable[[float], int]:
    offset = time.time() - clock()
    return lambda t: int((t + offset) * 1e9)


def _json(data: Any) -> bytes:
    return json.dumps(data, separators=(",", ":"), sort_keys=False).encode()


def ok_response(data: Any) -> web.Response:
    if isinstance(data, MetricsText):
        return web.Response(status=200, body=data.text.encode(), headers={"Content-Type": CONTENT_TYPE})
    if isinstance(data, PlainText):
        return web.Response(status=200, body=data.text.encode(), headers={"Content-Type": TEXT_TYPE})
    headers = dict([NSQ_CONTENT_TYPE])
    if data is None:
        return web.Response(status=200, body=b"", headers=headers)
    headers["Content-Type"] = JSON_TYPE
    return web.Response(status=200, body=_json(data), headers=headers)


def error_response(status: int, code: str) -> web.Response:
    return web.Response(status=status, body=_json({"message": code}),
                        headers={"Content-Type": JSON_TYPE, NSQ_CONTENT_TYPE[0]: NSQ_CONTENT_TYPE[1]})

