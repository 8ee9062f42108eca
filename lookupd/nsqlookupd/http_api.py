"""lookupd's HTTP API, with Go lookupd's routes, JSON shapes and status codes.

The routes sit on aiohttp's router; every answer, error, 404, 405 and OPTIONS is built
by Go's rules in ``nsq_protocol.http_api`` (shared with nsqd), and query strings are read
as Go reads them (``nsq_protocol.http_query``). The ``Accept: application/vnd.nsq;
version=1.0`` header that pynsq sends gets the same JSON as any other request.
"""
from __future__ import annotations

import logging
import time
from typing import Any, Callable

from aiohttp import web

from nsq_protocol import http_api as go_http
from nsq_protocol.http_api import HttpError, Reply
from nsq_protocol.http_query import QueryError, first, parse_query
from nsq_protocol.names import is_valid_channel_name, is_valid_topic_name

from . import metrics
from .registry import Registry

Params = dict[str, list[str]]
Handler = Callable[[Params], Any]


def respond(reply: Reply) -> web.Response:
    return web.Response(status=reply.status, body=reply.body, headers=reply.headers)


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
        }
        self._metrics = metrics.registry(metrics.LookupdCollector(registry, version, clock))

    # -- the aiohttp side ----------------------------------------------------
    def application(self) -> web.Application:
        app = web.Application(middlewares=[go_http.middleware(self.log, respond)])
        for path, methods in self.routes.items():
            for method, handler in methods.items():
                app.router.add_route(method, path, _with_query(handler))
        app.router.add_get("/metrics", self.metrics, allow_head=False)
        return app

    # -- handlers ------------------------------------------------------------
    def ping(self, params: Params) -> Reply:
        return go_http.plain_text(200, "OK")

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

    async def metrics(self, request: web.Request) -> Reply:
        """Beyond NSQ: producers, topics and channels for Prometheus (metrics.py)."""
        body, content_type = metrics.exposition(self._metrics, request.headers.get("Accept", ""))
        return Reply(200, body, {"Content-Type": content_type})

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


def _with_query(handler: Handler) -> Callable[[web.Request], Any]:
    """An aiohttp handler calling ``handler`` with the query string as Go reads it."""
    async def call(request: web.Request) -> Any:
        try:
            params = parse_query(request.rel_url.raw_query_string)
        except QueryError:
            raise HttpError(400, "INVALID_REQUEST") from None
        return handler(params)
    return call


def _wall_clock_ns(clock: Callable[[], float]) -> Callable[[float], int]:
    offset = time.time() - clock()
    return lambda t: int((t + offset) * 1e9)
