"""An HTTP relay in front of one pod's real process, for the operator's view of that pod:
every request goes on to the process unchanged, and a test may act at the moment one
chosen call passes (look at lookupd just before nsqd is told to delete a topic; flip a
flag back just after the operator set it).

Used with ``relayed``, which points the running operator's endpoints at the relay for the
duration of a ``with`` block."""
from __future__ import annotations

import contextlib
import socket
from typing import Awaitable, Callable, Iterator

import aiohttp
from aiohttp import web

from nsq_operator.endpoints import Endpoints
from nsq_operator.models.cluster import ClusterRef
from tests.operator.harness import OperatorUnderTest

Hook = Callable[[web.Request], Awaitable[None]]
HOST = "127.0.0.1"


class Relay:
    """Forwards to ``target()`` (read per request: a pod's process may move); ``before`` and
    ``after`` map ``(method, path)`` to a hook run around the forwarded call."""

    def __init__(self, target: Callable[[], str]) -> None:
        self.target = target
        self.before: dict[tuple[str, str], Hook] = {}
        self.after: dict[tuple[str, str], Hook] = {}
        self.url = ""
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None

    async def start(self) -> "Relay":
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._forward)
        self._session = aiohttp.ClientSession()
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        sock = socket.socket()
        sock.bind((HOST, 0))
        await web.SockSite(self._runner, sock).start()
        self.url = f"http://{HOST}:{sock.getsockname()[1]}"
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
        if self._session is not None:
            await self._session.close()

    async def __aenter__(self) -> "Relay":
        return await self.start()

    async def __aexit__(self, *_: object) -> None:
        await self.stop()

    async def _forward(self, request: web.Request) -> web.Response:
        assert self._session is not None
        key = (request.method, request.path)
        if key in self.before:
            await self.before[key](request)
        async with self._session.request(request.method, self.target() + request.path_qs,
                                         data=await request.read()) as answer:
            body, status = await answer.read(), answer.status
            content_type = answer.headers.get("Content-Type", "application/octet-stream")
        if key in self.after:
            await self.after[key](request)
        return web.Response(status=status, body=body, headers={"Content-Type": content_type})


class RelayedEndpoints:
    """The operator's endpoints, except that the named nsqd pods are reached through relays."""

    def __init__(self, inner: Endpoints, nsqds: dict[str, Relay]) -> None:
        self.inner, self.nsqds = inner, nsqds

    def nsqd_http(self, cluster: ClusterRef, pod: str) -> str:
        relay = self.nsqds.get(pod)
        return relay.url if relay is not None else self.inner.nsqd_http(cluster, pod)

    def lookupd_http(self, cluster: ClusterRef, pod: str) -> str:
        return self.inner.lookupd_http(cluster, pod)

    def lookupd_tcp(self, cluster: ClusterRef, pod: str) -> str:
        return self.inner.lookupd_tcp(cluster, pod)

    def nsqd_replication(self, cluster: ClusterRef, pod: str) -> str:
        return self.inner.nsqd_replication(cluster, pod)


@contextlib.contextmanager
def relayed(operator: OperatorUnderTest, nsqds: dict[str, Relay]) -> Iterator[None]:
    original = operator.runtime.endpoints
    operator.runtime.endpoints = RelayedEndpoints(original, nsqds)
    try:
        yield
    finally:
        operator.runtime.endpoints = original


def relay_to(operator: OperatorUnderTest, pod: str) -> Relay:
    return Relay(lambda: operator.pods.http(pod))
