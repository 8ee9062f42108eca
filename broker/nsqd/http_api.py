"""nsqd's HTTP API: Go nsqd's routes and handlers, served by our own h11 server
(http_server.py; aiohttp costs an idle nsqd 13 MiB), every answer built by Go's rules in
``nsq_protocol.http_api`` (shared with nsqlookupd)."""
from __future__ import annotations

import json
import logging
import sys
import time
from typing import TYPE_CHECKING, Any, Awaitable, Callable

from nsq_protocol.commands import parse_mpub_body
from nsq_protocol.errors import ProtocolError
from nsq_protocol import http_api as go_http
from nsq_protocol.http_api import JSON_TYPE, NSQ_CONTENT_TYPE, TEXT_TYPE, HttpError, Reply
from nsq_protocol.http_query import QueryError, first, parse_query
from nsq_protocol.names import is_valid_channel_name, is_valid_topic_name

from . import config_api
from . import stats as stats_module
from .diskqueue import DiskQueueError
from .drain import DrainRefused
from .handoff import parse_targets
from .group_commit import SyncError
from .options import MAX_TOPIC_REPLICAS
from .replication.membership import MembershipError
from .replication.topic_counts import TopicCountError
from .replication.tracker import ReplicationError
from .http_head import RequestHead
from .http_server import BodyUnreadable, HttpRequest, PrebuiltReply, refusal, split_target

if TYPE_CHECKING:
    from .metrics import Exposition
    from .nsqd import NSQD

log = logging.getLogger("nsqd")

Handler = Callable[[HttpRequest], Awaitable[Any]]
Params = dict[str, list[str]]
CONFIG_PREFIX = "/config/"


def _text_reply(status: int, text: str) -> Reply:
    return Reply(status, text.encode(), {"Content-Type": TEXT_TYPE, **NSQ_CONTENT_TYPE})


def query(request: HttpRequest) -> Params:
    """The query string read as Go's url.ParseQuery reads it; malformed: 400 INVALID_REQUEST."""
    try:
        return parse_query(request.query_string)
    except QueryError:
        raise HttpError(400, "INVALID_REQUEST") from None


_OK = go_http.ok("OK")
OK_REPLY = PrebuiltReply(_OK.status, _OK.body, _OK.headers)  # a publish's answer, the same every time
_PLANS_MAX = 1024  # request targets whose publish plans are remembered (forgotten all at once past it)


class _PubPlan:
    """What a ``/pub`` or ``/mpub`` target asks for, read from it once: the topic, and
    ``defer`` in ms (``/pub``) or binary mode (``/mpub``)."""

    __slots__ = ("mpub", "topic", "defer_ms", "binary")

    def __init__(self, mpub: bool, topic: str, defer_ms: int | None, binary: bool) -> None:
        self.mpub, self.topic, self.defer_ms, self.binary = mpub, topic, defer_ms, binary


def _binary_mode(params: Params) -> bool:
    binary = first(params, "binary")
    return binary is not None and binary not in ("0", "f", "F", "false", "FALSE", "False")


def _pub_plan(target: str) -> _PubPlan | None:
    """The plan of a ``POST`` to ``target`` when it is a well-formed ``/pub`` or ``/mpub``
    of a valid topic (and, for ``/pub``, a ``defer`` that is a number or absent); None
    for anything else, which the usual path answers."""
    path, query_string = split_target(target)
    if path != "/pub" and path != "/mpub":
        return None
    try:
        params = parse_query(query_string)
    except QueryError:
        return None
    topic = first(params, "topic")
    if topic is None or not is_valid_topic_name(topic):
        return None
    if path == "/mpub":
        return _PubPlan(True, topic, None, _binary_mode(params))
    defer_text = first(params, "defer")
    try:
        defer_ms = None if defer_text is None else int(defer_text)
    except ValueError:
        return None
    return _PubPlan(False, topic, defer_ms, False)


SERVED_WHILE_EXITING = {("GET", "/ping"), ("GET", "/info"), ("GET", "/ready"), ("GET", "/stats"),
                        ("GET", "/metrics"), ("GET", "/drain"), ("POST", "/drain")}


class HttpApi:
    def __init__(self, nsqd: "NSQD") -> None:
        self.nsqd = nsqd
        self._metrics: Exposition | None = None  # prometheus_client is loaded at the first scrape
        self._routes: dict[str, dict[str, Handler]] = {
            "/ping": {"GET": self.ping},
            "/info": {"GET": self.info},
            "/ready": {"GET": self.ready},
            "/drain": {"GET": self.drain_state, "POST": self.drain_start},
            "/pub": {"POST": self.pub},
            "/mpub": {"POST": self.mpub},
            "/stats": {"GET": self.stats},
            "/metrics": {"GET": self.metrics},
        }
        for action in ("create", "delete", "empty", "pause", "unpause"):
            self._routes[f"/topic/{action}"] = {"POST": getattr(self, f"topic_{action}")}
            self._routes[f"/channel/{action}"] = {"POST": getattr(self, f"channel_{action}")}
        self._config_route: dict[str, Handler] = {"GET": self.config, "PUT": self.config}
        self._plans: dict[str, _PubPlan | None] = {}  # request target -> its publish plan (None: not one)
        if nsqd.replicator is not None:  # beyond NSQ, and only where replication is on
            self._routes["/replication"] = {"GET": self.replication}
            self._routes["/replication/peers"] = {"GET": self.replication_peers, "PUT": self.replication_peers}

    def _route(self, request: HttpRequest) -> dict[str, Handler] | None:
        """The methods of the route ``request.path`` matches (None: no route); a variable
        part goes to ``request.path_arg``."""
        path = request.path
        methods = self._routes.get(path)
        if methods is None and path.startswith(CONFIG_PREFIX):
            opt = path[len(CONFIG_PREFIX):]
            if opt and "/" not in opt:
                request.path_arg = opt
                return self._config_route
        return methods

    async def handle(self, request: HttpRequest) -> Reply:
        """The answer to one request: the TLS policy, then routing and Go's answers
        (``nsq_protocol.http_api.answer``) around the exiting policy and the handler."""
        if self.nsqd.options.tls_required == "true" and not request.secure:
            return self._tls_required()
        methods = self._route(request)
        handler = None if methods is None else methods.get(request.method)
        call = None if handler is None else (lambda: self._call(handler, request))
        return await go_http.answer(request.method, request.target, request.remote, log, call,
                                    None if methods is None else methods.keys())

    def handle_now(self, head: RequestHead, body: bytes, secure: bool) -> Reply | None:
        """The fast lane of a publisher repeating its request (``http_server``'s
        ``HandleNow``): a ``POST /pub`` or ``/mpub`` answered at once, with no task and no
        request object, when every check of the usual path passes and nothing is to be
        waited for (not durable, not replicated, the topic exists). None, with nothing
        done, leaves the request to :meth:`handle`, which answers it the usual way (its
        errors included): so the answers are the same, only found sooner."""
        if head.method != "POST":
            return None
        plans = self._plans
        target = head.target
        plan = plans.get(target, False)
        if plan is False:
            if len(plans) >= _PLANS_MAX:
                plans.clear()
            plan = plans[target] = _pub_plan(target)
        if plan is None:
            return None
        nsqd = self.nsqd
        opts = nsqd.options
        if (nsqd.exiting or nsqd.committer is not None or nsqd.drain.refuses_publishes
                or (opts.tls_required == "true" and not secure) or log.isEnabledFor(logging.DEBUG)):
            return None  # answered by the usual path: refused, waited for, or logged
        topic = nsqd.topics.get(plan.topic)
        if topic is None or topic.replicated:
            return None
        if plan.mpub:
            if len(body) > opts.max_body_size:
                return None
            if plan.binary:
                try:
                    bodies = parse_mpub_body(body, opts.max_msg_size, opts.max_body_size)
                except ProtocolError:
                    return None
            else:
                bodies = [line for line in body.split(b"\n") if line]
                if any(len(b) > opts.max_msg_size for b in bodies):
                    return None
            defer = 0.0
        else:
            if not 0 < len(body) <= opts.max_msg_size:
                return None
            defer_ms = plan.defer_ms
            if defer_ms is None:
                defer = 0.0
            elif 0 <= defer_ms <= opts.max_req_timeout * 1000:
                defer = defer_ms / 1000
            else:
                return None
            bodies = [body]
        try:
            nsqd.publish(topic, bodies, defer)
        except (DiskQueueError, SyncError, ReplicationError) as e:  # as _put_durably and answer() do
            log.error("HTTP: publish failed: %s", e)
            return go_http.error(500, "INTERNAL_ERROR")
        except Exception:
            log.exception("HTTP: %s %s failed", head.method, target)
            return go_http.error(500, "INTERNAL_ERROR")
        return OK_REPLY

    def _tls_required(self) -> Reply:
        """``--tls-required=true`` closes the plain HTTP listener (tcp-https leaves it open):
        every request there is told where the HTTPS port is."""
        # Go writes this one by hand, with a space after each colon
        body = json.dumps({"message": "TLS_REQUIRED", "https_port": self.nsqd.https_port})
        return Reply(403, body.encode(), {"Content-Type": JSON_TYPE, **NSQ_CONTENT_TYPE})

    async def _call(self, handler: Handler, request: HttpRequest) -> Any:
        """Once stopping (a scale-down drain keeps the API up after that), only what reports
        on the node or drives its drain is served. A body that cannot be read is answered
        as a malformed request (the connection then closes)."""
        if self.nsqd.exiting and (request.method, request.path) not in SERVED_WHILE_EXITING:
            raise HttpError(503, "EXITING")
        try:
            return await handler(request)
        except BodyUnreadable as e:
            log.debug("HTTP: %s %s: unreadable body (%s)", request.method, request.target, e)
            return refusal(400)

    # -- basics ---------------------------------------------------------------
    async def ping(self, request: HttpRequest) -> Reply:
        if not self.nsqd.loaded:
            return _text_reply(503, "LOADING")  # alive, but what is on disk is not all open yet
        health = self.nsqd.health
        return go_http.plain_text(200 if health == "OK" else 500, health)

    async def info(self, request: HttpRequest) -> dict[str, Any]:
        return self.nsqd.info()

    async def replication(self, request: HttpRequest) -> dict[str, Any]:
        """Replicated topics (docs/replication.md): peers alive, each backup's lag,
        copies held for other owners, messages adopted from lost ones."""
        assert self.nsqd.replicator is not None
        return self.nsqd.replicator.stats()

    async def replication_peers(self, request: HttpRequest) -> dict[str, Any]:
        """The peer list and its epoch; PUT ``{"epoch": n, "peers": [...]}`` replaces it
        while running (docs/replication.md, *Changing the peer list*): 409 for an epoch
        not above the current one with another list."""
        replicator = self.nsqd.replicator
        assert replicator is not None
        if request.method == "PUT":
            body = await request.read_body(self.nsqd.options.max_body_size)
            try:
                doc = json.loads(body or b"")
                epoch, peers = doc["epoch"], doc["peers"]
                if not isinstance(epoch, int) or isinstance(epoch, bool) or epoch < 0:
                    raise ValueError("epoch must be a whole number, 0 or above")
                if not isinstance(peers, list) or not all(isinstance(p, str) and p for p in peers):
                    raise ValueError("peers must be a list of host:port strings")
            except (ValueError, KeyError, TypeError) as e:
                raise HttpError(400, f"INVALID_BODY: {e}") from None
            try:
                replicator.change_membership(peers, epoch)
            except MembershipError as e:
                raise HttpError(409, f"MEMBERSHIP_REFUSED: {e}") from None
        return {"epoch": replicator.membership.epoch, "peers": replicator.peers,
                "settled": replicator.settled_epoch}

    # -- drain (beyond NSQ; see drain.py) -------------------------------------
    async def ready(self, request: HttpRequest) -> str | Reply:
        """Readiness: unready from the moment a drain starts (/ping stays liveness)."""
        if self.nsqd.drain.draining:
            return _text_reply(503, "DRAINING")
        if not self.nsqd.loaded:
            return _text_reply(503, "LOADING")
        health = self.nsqd.health
        return "OK" if health == "OK" else _text_reply(503, health)

    async def drain_state(self, request: HttpRequest) -> dict[str, Any]:
        return self.nsqd.drain.state()

    async def drain_start(self, request: HttpRequest) -> dict[str, Any]:
        """``POST /drain``; ``?handoff=host:port[,...]`` for a scale-down (see drain.py)."""
        targets: list[str] = []
        handoff = first(query(request), "handoff")
        if handoff is not None:
            try:
                targets = parse_targets(handoff)
            except ValueError:
                raise HttpError(400, "INVALID_HANDOFF") from None
        try:
            self.nsqd.drain.request(targets)
        except DrainRefused as e:
            raise HttpError(503, e.code) from None
        return self.nsqd.drain.state()

    # -- publishing -----------------------------------------------------------
    def _topic_from_query(self, params: Params) -> str:
        name = first(params, "topic")
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

    async def pub(self, request: HttpRequest) -> str:
        opts = self.nsqd.options
        body = await request.read_body(opts.max_msg_size)
        if body is None:
            raise HttpError(413, "MSG_TOO_BIG")
        if not body:
            raise HttpError(400, "MSG_EMPTY")
        params = query(request)
        topic_name = self._topic_from_query(params)
        defer = 0.0
        defer_text = first(params, "defer")
        if defer_text is not None:
            try:
                defer_ms = int(defer_text)
            except ValueError:
                raise HttpError(400, "INVALID_DEFER") from None
            if not 0 <= defer_ms <= opts.max_req_timeout * 1000:
                raise HttpError(400, "INVALID_DEFER")
            defer = defer_ms / 1000
        self._check_not_exiting()
        topic = self.nsqd.get_topic(topic_name)
        await self._put_durably(lambda: self.nsqd.publish(topic, [body], defer))
        return OK_REPLY

    async def mpub(self, request: HttpRequest) -> str:
        opts = self.nsqd.options
        if request.content_length is not None and request.content_length > opts.max_body_size:
            raise HttpError(413, "BODY_TOO_BIG")
        params = query(request)
        topic_name = self._topic_from_query(params)
        self._check_not_exiting()
        topic = self.nsqd.get_topic(topic_name)
        binary_mode = _binary_mode(params)
        body = await request.read_body(opts.max_body_size)
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
        await self._put_durably(lambda: self.nsqd.publish(topic, bodies))
        return OK_REPLY

    async def _put_durably(self, put: Callable[[], Awaitable[None] | None]) -> None:
        """Put, and in durable mode wait until the messages are fsynced; for a replicated
        topic, until a quorum of its replicas holds them."""
        try:
            replicated = put()
            synced = self.nsqd.durable_barrier()
            if synced is not None:
                await synced
            if replicated is not None:
                await replicated
        except (DiskQueueError, SyncError, ReplicationError) as e:
            log.error("HTTP: publish failed: %s", e)
            raise HttpError(500, "INTERNAL_ERROR") from None

    # -- stats ----------------------------------------------------------------
    async def stats(self, request: HttpRequest) -> str | dict[str, Any]:
        params = query(request)
        flag = {"true": True, "1": True, "false": False, "0": False}
        doc = stats_module.collect(
            self.nsqd, first(params, "topic") or "", first(params, "channel") or "",
            include_clients=flag.get(first(params, "include_clients") or "", True),
            include_mem=flag.get(first(params, "include_mem") or "", True))
        if first(params, "format") == "json":
            return doc
        python = f"python{sys.version_info.major}.{sys.version_info.minor}"
        return stats_module.render_text(doc, python, self.nsqd.started_at, time.time())

    async def metrics(self, request: HttpRequest) -> Reply:
        """Beyond NSQ: the same numbers for Prometheus (metrics.py)."""
        if self._metrics is None:
            from .metrics import Exposition
            self._metrics = Exposition(self.nsqd)
        body, content_type = self._metrics.render(request.headers.get("accept", ""))
        return Reply(200, body, {"Content-Type": content_type})

    # -- topics ---------------------------------------------------------------
    def _existing_topic_name(self, request: HttpRequest, validate: bool) -> str:
        name = first(query(request), "topic")
        if name is None:
            raise HttpError(400, "MISSING_ARG_TOPIC")
        if validate and not is_valid_topic_name(name):
            raise HttpError(400, "INVALID_TOPIC")
        if name not in self.nsqd.topics:
            raise HttpError(404, "TOPIC_NOT_FOUND")
        return name

    async def topic_create(self, request: HttpRequest) -> None:
        params = query(request)
        name = self._topic_from_query(params)
        replicas = first(params, "replicas")  # beyond NSQ: the topic's own number of copies
        if replicas is not None:
            if not replicas.isdigit() or not 1 <= int(replicas) <= MAX_TOPIC_REPLICAS:
                raise HttpError(400, "INVALID_ARG_REPLICAS")
            try:
                self.nsqd.set_topic_replicas(name, int(replicas))
            except TopicCountError as e:
                raise HttpError(400, f"INVALID_ARG_REPLICAS: {e}") from None
        self.nsqd.get_topic(name)

    async def topic_delete(self, request: HttpRequest) -> None:
        self.nsqd.delete_topic(self._existing_topic_name(request, validate=False))

    async def topic_empty(self, request: HttpRequest) -> None:
        self.nsqd.empty_topic(self._existing_topic_name(request, validate=True))

    async def topic_pause(self, request: HttpRequest) -> None:
        self.nsqd.set_topic_paused(self._existing_topic_name(request, validate=False), True)

    async def topic_unpause(self, request: HttpRequest) -> None:
        self.nsqd.set_topic_paused(self._existing_topic_name(request, validate=False), False)

    # -- channels -------------------------------------------------------------
    def _topic_and_channel(self, request: HttpRequest) -> tuple[str, str]:
        params = query(request)
        topic = first(params, "topic")
        if topic is None:
            raise HttpError(400, "MISSING_ARG_TOPIC")
        if not is_valid_topic_name(topic):
            raise HttpError(400, "INVALID_ARG_TOPIC")
        channel = first(params, "channel")
        if channel is None:
            raise HttpError(400, "MISSING_ARG_CHANNEL")
        if not is_valid_channel_name(channel):
            raise HttpError(400, "INVALID_ARG_CHANNEL")
        if topic not in self.nsqd.topics:
            raise HttpError(404, "TOPIC_NOT_FOUND")
        return topic, channel

    def _existing_channel(self, request: HttpRequest) -> tuple[str, str]:
        topic, channel = self._topic_and_channel(request)
        if channel not in self.nsqd.topics[topic].channels:
            raise HttpError(404, "CHANNEL_NOT_FOUND")
        return topic, channel

    async def channel_create(self, request: HttpRequest) -> None:
        topic, channel = self._topic_and_channel(request)
        self.nsqd.topics[topic].get_channel(channel)

    async def channel_delete(self, request: HttpRequest) -> None:
        topic, channel = self._existing_channel(request)
        self.nsqd.topics[topic].delete_channel(channel)

    async def channel_empty(self, request: HttpRequest) -> None:
        self.nsqd.empty_channel(*self._existing_channel(request))

    async def channel_pause(self, request: HttpRequest) -> None:
        self.nsqd.set_channel_paused(*self._existing_channel(request), True)

    async def channel_unpause(self, request: HttpRequest) -> None:
        self.nsqd.set_channel_paused(*self._existing_channel(request), False)

    # -- /config/:opt (config_api) --------------------------------------------
    async def config(self, request: HttpRequest) -> Any:
        opt = request.path_arg
        if request.method == "PUT":
            body = await request.read_body(self.nsqd.options.max_msg_size)
            if not body:  # empty, or longer than --max-msg-size
                raise HttpError(413, "INVALID_VALUE")
            config_api.put_value(self.nsqd, opt, body)
        return config_api.served_value(self.nsqd, opt)
