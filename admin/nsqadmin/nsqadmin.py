"""NSQAdmin: the HTTP server that serves the API and the pages, its client session towards
the cluster and its notifier; ``start()`` binds, ``stop()`` closes everything."""
from __future__ import annotations

import logging
import time
from typing import Awaitable, Callable

import aiohttp
from aiohttp import web

from nsq_protocol.host_port import split_host_port

from .clusterinfo import ClusterInfo
from .http_api import AdminApi, AdminState
from .notify import Notifier
from .options import NsqadminOptions
from .pages import Pages
from .responses import error, text


@web.middleware
async def go_errors(request: web.Request,
                    handler: Callable[[web.Request], Awaitable[web.StreamResponse]]) -> web.StreamResponse:
    """Unknown paths and wrong methods answer like Go's router: 404 NOT_FOUND, 405
    METHOD_NOT_ALLOWED with ``Allow``."""
    try:
        return await handler(request)
    except web.HTTPMethodNotAllowed as e:
        response = error(405, "METHOD_NOT_ALLOWED")
        response.headers["Allow"] = ", ".join(sorted({*e.allowed_methods, "OPTIONS"}))
        return response
    except web.HTTPNotFound:
        return error(404, "NOT_FOUND")


class NSQAdmin:
    def __init__(self, options: NsqadminOptions, logger: logging.Logger) -> None:
        self.options = options
        self.log = logger
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None
        self.state: AdminState | None = None
        self.port = 0

    def application(self) -> web.Application:
        assert self.state is not None
        app = web.Application(middlewares=[go_errors, self._access_log])
        app.router.add_route("GET", self.options.route("/ping"), self._ping)
        AdminApi(self.state).add_routes(app)
        Pages(self.state).add_routes(app)
        return app

    async def _ping(self, request: web.Request) -> web.Response:
        return text("OK")

    @web.middleware
    async def _access_log(self, request: web.Request,
                          handler: Callable[[web.Request], Awaitable[web.StreamResponse]]) -> web.StreamResponse:
        started = time.perf_counter()
        response = await handler(request)
        self.log.debug("%d %s %s (%s) %.3fms", response.status, request.method, request.path_qs,
                       request.remote, (time.perf_counter() - started) * 1000)
        return response

    async def start(self) -> None:
        # one pool for every lookupd and nsqd; per-request timeouts come from the options
        self._session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=64))
        notifier = Notifier(self.options.notification_http_endpoint, self._session, self.log,
                            timeout=self.options.http_client_request_timeout)
        self.state = AdminState(self.options, ClusterInfo(self.options, self._session), notifier, self.log)
        host, port = split_host_port(self.options.http_address)
        self._runner = web.AppRunner(self.application(), access_log=None, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, host or None, port)
        try:
            await site.start()
        except OSError:
            await self.stop()
            raise
        server = site._server  # the bound socket tells the port when 0 was asked for
        sockets = getattr(server, "sockets", None) or []
        self.port = sockets[0].getsockname()[1] if sockets else port
        notifier.start()
        self.log.info("HTTP: listening on %s:%d", host or "0.0.0.0", self.port)

    async def stop(self) -> None:
        if self.state is not None:
            await self.state.notifier.stop()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        if self._session is not None:
            await self._session.close()
            self._session = None
