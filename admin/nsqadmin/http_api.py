"""nsqadmin's JSON API: Go nsqadmin v1.3.0's routes, shapes and status codes.

Reads answer 200 with what some nodes said and a ``message`` of ``WARNING: ...`` naming
the nodes that did not; 502 ``UPSTREAM_ERROR: ...`` when none answered. Actions answer
``{"message": ""}``, 400 for a bad body or action, 403 ``FORBIDDEN`` for a user not in
``--admin-user``, and notify ``--notification-http-endpoint``.
"""
from __future__ import annotations

import ipaddress
import json
import logging
from dataclasses import dataclass
from typing import Any, Awaitable, Callable

from aiohttp import web

from nsq_protocol.logfmt import LOG_LEVELS, level_number, normalize_level
from nsq_protocol.names import is_valid_channel_name, is_valid_topic_name

from . import producers as prods
from . import stats
from .actions import VERBS, Actions
from .clusterinfo import ClusterInfo, UpstreamError
from .notify import Notifier, admin_action
from .options import NsqadminOptions
from .responses import HttpError, v1, warnings

MAX_CONFIG_BODY = 1024 * 1024
GO_LOG_LEVELS = {level: i + 1 for i, level in enumerate(LOG_LEVELS)}  # Go's lg.LogLevel numbers


@dataclass
class AdminState:
    """What the handlers share; ``options`` and ``cluster`` change on ``PUT /config``."""
    options: NsqadminOptions
    cluster: ClusterInfo
    notifier: Notifier
    log: logging.Logger

    @property
    def actions(self) -> Actions:
        return Actions(self.cluster)

    def set_options(self, options: NsqadminOptions) -> None:
        self.options = options
        self.cluster = self.cluster.with_options(options)
        self.log.setLevel(level_number(options.log_level))


def is_admin(options: NsqadminOptions, request: web.Request) -> bool:
    if not options.admin_users:
        return True
    return request.headers.get(options.acl_http_header, "") in options.admin_users


Handler = Callable[[web.Request], Awaitable[Any]]


class AdminApi:
    def __init__(self, state: AdminState) -> None:
        self.state = state

    def add_routes(self, app: web.Application) -> None:
        r = self.state.options.route
        add = app.router.add_route
        add("GET", r("/api/topics"), self._json(self.topics))
        add("POST", r("/api/topics"), self._json(self.create_topic_channel))
        add("GET", r("/api/topics/{topic}"), self._json(self.topic))
        add("POST", r("/api/topics/{topic}"), self._json(self.topic_action))
        add("DELETE", r("/api/topics/{topic}"), self._json(self.delete_topic))
        add("GET", r("/api/topics/{topic}/{channel}"), self._json(self.channel))
        add("POST", r("/api/topics/{topic}/{channel}"), self._json(self.channel_action))
        add("DELETE", r("/api/topics/{topic}/{channel}"), self._json(self.delete_channel))
        add("GET", r("/api/nodes"), self._json(self.nodes))
        add("GET", r("/api/nodes/{node}"), self._json(self.node))
        add("DELETE", r("/api/nodes/{node}"), self._json(self.tombstone_topic_producer))
        add("GET", r("/api/counter"), self._json(self.counter))
        add("GET", r("/config/{opt}"), self._json(self.config))
        add("PUT", r("/config/{opt}"), self._json(self.config))

    def _json(self, handler: Handler) -> Callable[[web.Request], Awaitable[web.Response]]:
        async def respond(request: web.Request) -> web.Response:
            try:
                return v1(await handler(request))
            except HttpError as e:
                return v1({"message": e.message}, e.status)
            except UpstreamError as e:
                self.state.log.error("%s %s - %s", request.method, request.path, e)
                return v1({"message": f"UPSTREAM_ERROR: {e}"}, 502)
        return respond

    @property
    def cluster(self) -> ClusterInfo:
        return self.state.cluster

    def _warn(self, messages: list[str]) -> str:
        for message in messages:
            self.state.log.warning("%s", message)
        return warnings(messages)

    # -- reads ----------------------------------------------------------------
    async def topics(self, request: web.Request) -> Any:
        topics, errors = await self.cluster.topics()
        if request.query.get("inactive") == "true":
            return {"topics": await self.cluster.inactive_topics(topics), "message": self._warn(errors)}
        return {"topics": topics or None, "message": self._warn(errors)}

    async def topic(self, request: web.Request) -> Any:
        name = request.match_info["topic"]
        producers, errors = await self.cluster.topic_producers(name)
        node_topics, stat_errors = await self.cluster.node_stats(producers, name)
        return {**stats.sum_topic(name, node_topics), "message": self._warn(errors + stat_errors)}

    async def channel(self, request: web.Request) -> Any:
        topic, channel = request.match_info["topic"], request.match_info["channel"]
        producers, errors = await self.cluster.topic_producers(topic)
        node_topics, stat_errors = await self.cluster.node_stats(producers, topic, channel, include_clients=True)
        parts = [c for t in node_topics for c in t["channels"] if c["channel_name"] == channel]
        body = stats.sum_channel(topic, channel, parts) if parts else {}
        return {**body, "message": self._warn(errors + stat_errors)}

    async def nodes(self, request: web.Request) -> Any:
        producers, errors = await self.cluster.producers()
        return {"nodes": [p.to_json() for p in producers] or None, "message": self._warn(errors)}

    async def node(self, request: web.Request) -> Any:
        name = request.match_info["node"]
        producers, errors = await self.cluster.producers()
        producer = prods.search(producers, name)
        if producer is None:
            raise HttpError(404, "NODE_NOT_FOUND")
        node_topics, _ = await self.cluster.node_stats([producer], include_clients=True)
        messages, clients = stats.node_totals(node_topics)
        return {"node": name, "topics": node_topics or None, "total_messages": messages,
                "total_clients": clients, "message": self._warn(errors)}

    async def counter(self, request: web.Request) -> Any:
        producers, errors = await self.cluster.producers()
        node_topics, stat_errors = await self.cluster.node_stats(producers)
        return {"stats": stats.counters(node_topics), "message": self._warn(errors + stat_errors)}

    # -- actions --------------------------------------------------------------
    def _authorize(self, request: web.Request) -> None:
        if not is_admin(self.state.options, request):
            raise HttpError(403, "FORBIDDEN")

    def _notify(self, action: str, request: web.Request, topic: str, channel: str = "", node: str = "") -> None:
        self.state.notifier.notify(admin_action(action, topic, channel, node, request))

    async def create_topic_channel(self, request: web.Request) -> Any:
        self._authorize(request)
        body = await _json_object(request, {"topic": str, "channel": str})
        topic, channel = body.get("topic", ""), body.get("channel", "")
        if not is_valid_topic_name(topic):
            raise HttpError(400, "INVALID_TOPIC")
        if channel and not is_valid_channel_name(channel):
            raise HttpError(400, "INVALID_CHANNEL")
        errors = await self.state.actions.create(topic, channel)
        self._notify("create_topic", request, topic)
        if channel:
            self._notify("create_channel", request, topic, channel)
        return {"message": self._warn(errors)}

    async def delete_topic(self, request: web.Request) -> Any:
        self._authorize(request)
        topic = request.match_info["topic"]
        errors = await self.state.actions.delete_topic(topic)
        self._notify("delete_topic", request, topic)
        return {"message": self._warn(errors)}

    async def delete_channel(self, request: web.Request) -> Any:
        self._authorize(request)
        topic, channel = request.match_info["topic"], request.match_info["channel"]
        errors = await self.state.actions.delete_channel(topic, channel)
        self._notify("delete_channel", request, topic, channel)
        return {"message": self._warn(errors)}

    async def topic_action(self, request: web.Request) -> Any:
        return await self._verb(request, request.match_info["topic"], "")

    async def channel_action(self, request: web.Request) -> Any:
        return await self._verb(request, request.match_info["topic"], request.match_info["channel"])

    async def _verb(self, request: web.Request, topic: str, channel: str) -> Any:
        self._authorize(request)
        verb = (await _json_object(request, {"action": str})).get("action", "")
        if verb not in VERBS:
            raise HttpError(400, "INVALID_ACTION")
        if channel:
            errors = await self.state.actions.channel_verb(verb, topic, channel)
            self._notify(f"{verb}_channel", request, topic, channel)
        else:
            errors = await self.state.actions.topic_verb(verb, topic)
            self._notify(f"{verb}_topic", request, topic)
        return {"message": self._warn(errors)}

    async def tombstone_topic_producer(self, request: web.Request) -> Any:
        self._authorize(request)
        node = request.match_info["node"]
        try:
            topic = (await _json_object(request, {"topic": str})).get("topic", "")
        except HttpError:
            raise HttpError(400, "INVALID_BODY") from None
        if not is_valid_topic_name(topic):
            raise HttpError(400, "INVALID_TOPIC")
        errors = await self.state.actions.tombstone(topic, node)
        self._notify("tombstone_topic_producer", request, topic, "", node)
        return {"message": self._warn(errors)}

    # -- /config/:opt ---------------------------------------------------------
    async def config(self, request: web.Request) -> Any:
        _check_config_peer(self.state.options, request)
        opt = request.match_info["opt"]
        if request.method == "PUT":
            body = await request.content.read(MAX_CONFIG_BODY + 1)
            if not body or len(body) > MAX_CONFIG_BODY:
                raise HttpError(413, "INVALID_VALUE")
            self.state.set_options(_changed_options(self.state.options, opt, body))
        return config_value(self.state.options, opt)


def config_value(options: NsqadminOptions, opt: str) -> Any:
    """An option as Go's nsqadmin shows it: durations in nanoseconds, the log level by
    Go's number (debug 1 ... fatal 5)."""
    if opt not in NsqadminOptions.model_fields:
        raise HttpError(400, "INVALID_OPTION")
    value = getattr(options, opt)
    if opt == "log_level":
        return GO_LOG_LEVELS[value]
    if opt in ("http_client_connect_timeout", "http_client_request_timeout"):
        return int(round(value * 1e9))
    return list(value) if isinstance(value, list) else value


def _changed_options(options: NsqadminOptions, opt: str, body: bytes) -> NsqadminOptions:
    if opt == "nsqlookupd_http_addresses":
        try:
            addresses = json.loads(body)
        except ValueError:
            raise HttpError(400, "INVALID_VALUE") from None
        if not isinstance(addresses, list) or not all(isinstance(a, str) for a in addresses):
            raise HttpError(400, "INVALID_VALUE")
        update: dict[str, Any] = {"nsqlookupd_http_addresses": addresses}
    elif opt == "log_level":
        try:
            update = {"log_level": normalize_level(body.decode("utf-8", "replace").strip())}
        except ValueError:
            raise HttpError(400, "INVALID_VALUE") from None
    else:
        raise HttpError(400, "INVALID_OPTION")
    try:
        return NsqadminOptions.model_validate({**options.model_dump(), **update})
    except ValueError:
        raise HttpError(400, "INVALID_VALUE") from None


def _check_config_peer(options: NsqadminOptions, request: web.Request) -> None:
    if not options.allow_config_from_cidr:
        return
    try:
        peer = ipaddress.ip_address(request.remote or "")
    except ValueError:
        raise HttpError(400, "INVALID_REMOTE_ADDR") from None
    if peer not in ipaddress.ip_network(options.allow_config_from_cidr, strict=False):
        raise HttpError(403, "FORBIDDEN")


async def _json_object(request: web.Request, fields: dict[str, type]) -> dict[str, Any]:
    """The body as one JSON object whose known ``fields`` have their types (other keys are
    ignored, as Go's decoder does); 400 with what is wrong otherwise."""
    raw = await request.read()
    if not raw.strip():
        raise HttpError(400, "EOF")
    try:
        value = json.loads(raw)
    except ValueError as e:
        raise HttpError(400, f"invalid JSON body: {e}") from None
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise HttpError(400, f"json: cannot unmarshal {type(value).__name__} into an object")
    for key, kind in fields.items():
        if key in value and value[key] is not None and not isinstance(value[key], kind):
            raise HttpError(400, f"json: field {key} must be a {kind.__name__}")
    return {k: value[k] for k in fields if value.get(k) is not None}

