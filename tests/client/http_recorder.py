"""A recording HTTP proxy in front of an HTTP API (nsqlookupd's): forwards each request
and its answer unchanged and keeps when and what was asked, so tests can count a
client's queries as the server received them."""
from __future__ import annotations

import time
from dataclasses import dataclass

import aiohttp
from aiohttp import web

from tests.servers import HOST, free_port


@dataclass(frozen=True)
class Request:
    at: float
    method: str
    path: str  # with its query string


class RecordingHttpProxy:
    def __init__(self, target: str) -> None:
        self.target = target  # host:port
        self.port = free_port()
        self.requests: list[Request] = []
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None

    @property
    def address(self) -> str:
        return f"{HOST}:{self.port}"

    def times(self, path_prefix: str) -> list[float]:
        """When each request whose path starts with ``path_prefix`` arrived."""
        return [r.at for r in self.requests if r.path.startswith(path_prefix)]

    async def start(self) -> "RecordingHttpProxy":
        self._session = aiohttp.ClientSession()
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._forward)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, HOST, self.port).start()
        return self

    async def _forward(self, request: web.Request) -> web.Response:
        self.requests.append(Request(time.monotonic(), request.method, request.path_qs))
        assert self._session is not None
        headers = {k: v for k, v in request.headers.items() if k.lower() == "accept"}
        async with self._session.request(request.method, f"http://{self.target}{request.path_qs}",
                                         data=await request.read(), headers=headers) as answer:
            body = await answer.read()
            return web.Response(status=answer.status, body=body,
                                content_type=answer.content_type)

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
        if self._session is not None:
            await self._session.close()
