"""nsqd's HTTP API, with NSQ's routes, status codes and ``{"message": CODE}`` errors."""
from __future__ import annotations

import json
import logging
import time
from typing import TYPE_CHECKING, Any, Awaitable, Callable

from aiohttp import web

from nsq_protocol.commands import parse_mpub_body
from nsq_protocol.errors import ProtocolError
from nsq_protocol.flags import is_duration_field
from nsq_protocol.names import is_valid_channel_name, is_valid_topic_name

from . import metrics as metrics_module
from . import stats as stats_module
from .diskqueue import DiskQueueError
from .drain import DrainRefused
from .handoff import parse_targets
from .group_commit import SyncError
from .options import LOG_LEVELS, NsqdOptions

if TYPE_CHECKING:
    from .nsqd import NSQD

log = logging.getLogger("nsqd")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class HttpError(Exception):
    def __init__(self, status: int, code: str) -> None:
        super().__init__(code)
        self.status = status
        self.code = code


def _json(data: Any, status: int = 200) -> web.Response:
    return web.Response(status=status, body=json.dumps(data).encode(),
                        content_type="application/json", charset="utf-8",
                        headers={"X-NSQ-Content-Type": "nsq; version=1.0"})


def _text(body: bytes | str, status: int = 200) -> web.Response:
    data = body.encode() if isinstance(body, str) else body
    return web.Response(status=status, body=data, content_type="text/plain",
                        headers={"X-NSQ-Content-Type": "nsq; version=1.0"})


def _error(status: int, code: str) -> web.Response:
    return _json({"message": code}, status)


@web.middleware
async def _errors_as_json(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except HttpError as e:
        return _error(e.status, e.code)
    except web.HTTPNotFound:
        return _error(404, "NOT_FOUND")
    except web.HTTPMethodNotAllowed:
        return _error(405, "METHOD_NOT_ALLOWED")
    except web.HTTPException:
        raise
    except Exception:
        log.exception("HTTP: %s %s failed", request.method, request.path_qs)
        return _error(500, "INTERNAL_ERROR")


async def read_body(request: web.Request, limit: int) -> bytes | None:
    """The request body, or None when it is longer than ``limit``."""
    if request.content_length is not None and request.content_length > limit:
        return None
    chunks, total = [], 0
    async for chunk in request.content.iter_any():
        total += len(chunk)
        if total > limit:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


def _arg(request: web.Request, name: str) -> str | None:
    return request.query.get(name)


SERVED_WHILE_EXITING = {("GET", "/ping"), ("GET", "/info"), ("GET", "/ready"), ("GET", "/stats"),
                        ("GET", "/metrics"), ("GET", "/drain"), ("POST", "/drain")}


class HttpApi:
    def __init__(self, nsqd: "NSQD") -> None:
        self.nsqd = nsqd

    def app(self) -> web.Application:
        app = web.Application(middlewares=[self._tls_policy, _errors_as_json, self._exiting],
                              client_max_size=1024 ** 3)
        r = app.router
        r.add_get("/ping", self.ping, allow_head=False)
        r.add_get("/info", self.info, allow_head=False)
        r.add_get("/ready", self.ready, allow_head=False)
        r.add_get("/drain", self.drain_state, allow_head=False)
        r.add_post("/drain", self.drain_start)
        r.add_post("/pub", self.pub)
        r.add_post("/mpub", self.mpub)
        r.add_get("/stats", self.stats, allow_head=False)
        r.add_get("/metrics", self.metrics, allow_head=False)
        for action in ("create", "delete", "empty", "pause", "unpause"):
            r.add_post(f"/topic/{action}", getattr(self, f"topic_{action}"))
            r.add_post(f"/channel/{action}", getattr(self, f"channel_{action}"))
        r.add_get("/config/{opt}", self.config, allow_head=False)
        r.add_put("/config/{opt}", self.config)
        return app

    @web.middleware
    async def _tls_policy(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """``--tls-required=true`` closes the plain HTTP listener (tcp-https leaves it open):
        every request there is told where the HTTPS port is."""
        if self.nsqd.options.tls_required == "true" and not request.secure:
            body = json.dumps({"message": "TLS_REQUIRED", "https_port": self.nsqd.https_port})
            return web.Response(status=403, body=body.encode(), content_type="application/json",
                                charset="utf-8", headers={"X-NSQ-Content-Type": "nsq; version=1.0"})
        return await handler(request)

    @web.middleware
    async def _exiting(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """Once stopping (a scale-down drain keeps the API up after that), only what reports
        on the node or drives its drain is served."""
        if self.nsqd.exiting and (request.method, request.path) not in SERVED_WHILE_EXITING:
            return _error(503, "EXITING")
        return await handler(request)

    # -- basics ---------------------------------------------------------------
    async def ping(self, request: web.Request) -> web.Response:
        health = self.nsqd.health
        return _text("OK") if health == "OK" else _text(health, 500)

    async def info(self, request: web.Request) -> web.Response:
        return _json(self.nsqd.info())

    # -- drain (beyond NSQ; see drain.py) -------------------------------------
    async def ready(self, request: web.Request) -> web.Response:
        """Readiness: unready from the moment a drain starts (/ping stays liveness)."""
        if self.nsqd.drain.draining:
            return _text("DRAINING", 503)
        health = self.nsqd.health
        return _text("OK") if health == "OK" else _text(health, 503)

    async def drain_state(self, request: web.Request) -> web.Response:
        return _json(self.nsqd.drain.state())

    async def drain_start(self, request: web.Request) -> web.Response:
        """``POST /drain``; ``?handoff=host:port[,...]`` for a scale-down (see drain.py)."""
        targets: list[str] = []
        if "handoff" in request.query:
            try:
                targets = parse_targets(request.query["handoff"])
            except ValueError:
                raise HttpError(400, "INVALID_HANDOFF") from None
        try:
            self.nsqd.drain.request(targets)
        except DrainRefused as e:
            raise HttpError(503, e.code) from None
        return _json(self.nsqd.drain.state())

    # -- publishing -----------------------------------------------------------
    def _topic_from_query(self, request: web.Request) -> str:
        name = _arg(request, "topic")
        if name is None:
            raise HttpError(400, "MISSING_ARG_TOPIC")
        if not is_valid_topic_name(name):
            raise HttpError(400, "INVALID_TOPIC")
        return name

    def _check_not_exiting(self) -> None:
        if self.nsqd.exiting:
            raise HttpError(503, "EXITING")
        if self.nsqd.drain.refuses_publishes:
            raise HttpError(503, "DRAINING")

    async def pub(self, request: web.Request) -> web.Response:
        opts = self.nsqd.options
        body = await read_body(request, opts.max_msg_size)
        if body is None:
            raise HttpError(413, "MSG_TOO_BIG")
        if not body:
            raise HttpError(400, "MSG_EMPTY")
        topic_name = self._topic_from_query(request)
        defer = 0.0
        if "defer" in request.query:
            try:
                defer_ms = int(request.query["defer"])
            except ValueError:
                raise HttpError(400, "INVALID_DEFER") from None
            if not 0 <= defer_ms <= opts.max_req_timeout * 1000:
                raise HttpError(400, "INVALID_DEFER")
            defer = defer_ms / 1000
        self._check_not_exiting()
        topic = self.nsqd.get_topic(topic_name)
        msg = self.nsqd.new_message(body)
        msg.defer = defer
        await self._put_durably(lambda: topic.put(msg))
        return _text("OK")

    async def mpub(self, request: web.Request) -> web.Response:
        opts = self.nsqd.options
        if request.content_length is not None and request.content_length > opts.max_body_size:
            raise HttpError(413, "BODY_TOO_BIG")
        topic_name = self._topic_from_query(request)
        self._check_not_exiting()
        topic = self.nsqd.get_topic(topic_name)
        binary = request.query.get("binary")
        binary_mode = binary is not None and binary not in ("0", "f", "F", "false", "FALSE", "False")
        body = await read_body(request, opts.max_body_size)
        if body is None:
            raise HttpError(413, "BODY_TOO_BIG")
        if binary_mode:
            try:
                bodies = parse_mpub_body(body, opts.max_msg_size, opts.max_body_size)
            except ProtocolError as e:
                raise HttpError(413, e.code[2:]) from None
        else:
            bodies = [line for line in body.split(b"\n") if line]
            if any(len(b) > opts.max_msg_size for b in bodies):
                raise HttpError(413, "MSG_TOO_BIG")
        msgs = [self.nsqd.new_message(b) for b in bodies]
        await self._put_durably(lambda: topic.put_many(msgs))
        return _text("OK")

    async def _put_durably(self, put: Callable[[], None]) -> None:
        """Put, and in durable mode wait until the messages are fsynced."""
        try:
            put()
            synced = self.nsqd.durable_barrier()
            if synced is not None:
                await synced
        except (DiskQueueError, SyncError) as e:
            log.error("HTTP: publish failed: %s", e)
            raise HttpError(500, "INTERNAL_ERROR") from None

    # -- stats ----------------------------------------------------------------
    async def stats(self, request: web.Request) -> web.Response:
        q = request.query
        flag = {"true": True, "1": True, "false": False, "0": False}
        doc = stats_module.collect(
            self.nsqd, q.get("topic", ""), q.get("channel", ""),
            include_clients=flag.get(q.get("include_clients", ""), True),
            include_mem=flag.get(q.get("include_mem", ""), True))
        if q.get("format") == "json":
            return _json(doc)
        return _text(stats_module.render_text(doc, time.time() - self.nsqd.start_time))

    async def metrics(self, request: web.Request) -> web.Response:
        """Beyond NSQ: the same numbers for Prometheus."""
        doc = stats_module.collect(self.nsqd, include_clients=False, include_mem=True)
        body = metrics_module.render(doc, clients=len(self.nsqd.clients), durable=self.nsqd.committer)
        return web.Response(body=body.encode(), headers={"Content-Type": metrics_module.CONTENT_TYPE})

    # -- topics ---------------------------------------------------------------
    def _existing_topic_name(self, request: web.Request, validate: bool) -> str:
        name = _arg(request, "topic")
        if name is None:
            raise HttpError(400, "MISSING_ARG_TOPIC")
        if validate and not is_valid_topic_name(name):
            raise HttpError(400, "INVALID_TOPIC")
        if name not in self.nsqd.topics:
            raise HttpError(404, "TOPIC_NOT_FOUND")
        return name

    async def topic_create(self, request: web.Request) -> web.Response:
        self.nsqd.get_topic(self._topic_from_query(request))
        return _text(b"")

    async def topic_delete(self, request: web.Request) -> web.Response:
        self.nsqd.delete_topic(self._existing_topic_name(request, validate=False))
        return _text(b"")

    async def topic_empty(self, request: web.Request) -> web.Response:
        self.nsqd.topics[self._existing_topic_name(request, validate=True)].empty()
        return _text(b"")

    async def topic_pause(self, request: web.Request) -> web.Response:
        self.nsqd.set_topic_paused(self._existing_topic_name(request, validate=False), True)
        return _text(b"")

    async def topic_unpause(self, request: web.Request) -> web.Response:
        self.nsqd.set_topic_paused(self._existing_topic_name(request, validate=False), False)
        return _text(b"")

    # -- channels -------------------------------------------------------------
    def _topic_and_channel(self, request: web.Request) -> tuple[str, str]:
        topic = _arg(request, "topic")
        if topic is None:
            raise HttpError(400, "MISSING_ARG_TOPIC")
        if not is_valid_topic_name(topic):
            raise HttpError(400, "INVALID_ARG_TOPIC")
        channel = _arg(request, "channel")
        if channel is None:
            raise HttpError(400, "MISSING_ARG_CHANNEL")
        if not is_valid_channel_name(channel):
            raise HttpError(400, "INVALID_ARG_CHANNEL")
        if topic not in self.nsqd.topics:
            raise HttpError(404, "TOPIC_NOT_FOUND")
        return topic, channel

    def _existing_channel(self, request: web.Request) -> tuple[str, str]:
        topic, channel = self._topic_and_channel(request)
        if channel not in self.nsqd.topics[topic].channels:
            raise HttpError(404, "CHANNEL_NOT_FOUND")
        return topic, channel

    async def channel_create(self, request: web.Request) -> web.Response:
        topic, channel = self._topic_and_channel(request)
        self.nsqd.topics[topic].get_channel(channel)
        return _text(b"")

    async def channel_delete(self, request: web.Request) -> web.Response:
        topic, channel = self._existing_channel(request)
        self.nsqd.topics[topic].delete_channel(channel)
        return _text(b"")

    async def channel_empty(self, request: web.Request) -> web.Response:
        topic, channel = self._existing_channel(request)
        self.nsqd.topics[topic].channels[channel].empty()
        return _text(b"")

    async def channel_pause(self, request: web.Request) -> web.Response:
        self.nsqd.set_channel_paused(*self._existing_channel(request), True)
        return _text(b"")

    async def channel_unpause(self, request: web.Request) -> web.Response:
        self.nsqd.set_channel_paused(*self._existing_channel(request), False)
        return _text(b"")

    # -- /config/:opt ---------------------------------------------------------
    async def config(self, request: web.Request) -> web.Response:
        opt = request.match_info["opt"]
        opts = self.nsqd.options
        if request.method == "PUT":
            body = await read_body(request, opts.max_msg_size)
            if not body:
                raise HttpError(413, "INVALID_VALUE")
            if opt == "nsqlookupd_tcp_addresses":
                try:
                    addresses = json.loads(body)
                except ValueError:
                    raise HttpError(400, "INVALID_VALUE") from None
                if not isinstance(addresses, list) or not all(isinstance(a, str) for a in addresses):
                    raise HttpError(400, "INVALID_VALUE")
                try:
                    self.nsqd.set_lookupd_addresses(addresses)
                except ValueError:  # not host:port; Go nsqd takes it and fails at every dial
                    raise HttpError(400, "INVALID_VALUE") from None
            elif opt == "log_level":
                level = body.decode("utf-8", "replace").strip().lower()
                if level not in LOG_LEVELS:
                    raise HttpError(400, "INVALID_VALUE")
                self.nsqd.set_log_level(level)
            else:
                raise HttpError(400, "INVALID_OPTION")
        if opt not in NsqdOptions.model_fields:
            raise HttpError(400, "INVALID_OPTION")
        value = getattr(self.nsqd.options, opt)
        if is_duration_field(NsqdOptions, opt):
            value = int(round(value * 1e9))  # Go marshals durations as nanoseconds
        return _json(value)
