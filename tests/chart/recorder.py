"""A reverse proxy in front of the emulated Kubernetes API that notes every request
passing through it, watch streams included (they are relayed as they come).

It runs its own event loop in a thread: kopf, at exit, cancels every task of its loop it
does not own, and the proxy's request handlers must not be among them."""
from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass

import aiohttp
from aiohttp import web

FORWARDED_HEADERS = ("content-type", "accept", "authorization")


@dataclass(frozen=True)
class Seen:
    method: str
    path: str
    query: dict[str, str]


class RecordingProxy:
    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.url = ""
        self._seen: list[Seen] = []
        self._lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="recording-proxy", daemon=True)
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None

    @property
    def seen(self) -> list[Seen]:
        with self._lock:
            return list(self._seen)

    def start(self) -> str:
        self._thread.start()
        self.url = asyncio.run_coroutine_threadsafe(self._serve(), self._loop).result(10)
        return self.url

    def stop(self) -> None:
        if not self._thread.is_alive():
            self._loop.close()
            return
        try:
            asyncio.run_coroutine_threadsafe(self._close(), self._loop).result(10)
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
            self._loop.close()

    async def _serve(self) -> str:
        self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None))
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._relay)
        self._runner = web.AppRunner(app, shutdown_timeout=1)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", 0).start()
        host, port = self._runner.addresses[0][:2]
        return f"http://{host}:{port}"

    async def _close(self) -> None:
        if self._session is not None:
            await self._session.close()  # ends the relays of watch streams still open
        if self._runner is not None:
            await self._runner.cleanup()
        rest = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in rest:
            task.cancel()
        await asyncio.gather(*rest, return_exceptions=True)

    async def _relay(self, request: web.Request) -> web.StreamResponse:
        assert self._session is not None
        with self._lock:
            self._seen.append(Seen(request.method, request.path, dict(request.query)))
        body = await request.read()
        headers = {k: v for k, v in request.headers.items() if k.lower() in FORWARDED_HEADERS}
        async with self._session.request(request.method, self.upstream + request.path_qs, data=body or None,
                                         headers=headers) as upstream:
            response = web.StreamResponse(status=upstream.status, headers={
                "Content-Type": upstream.headers.get("Content-Type", "application/json")})
            await response.prepare(request)
            try:
                async for chunk in upstream.content.iter_any():
                    await response.write(chunk)
                await response.write_eof()
            except (ConnectionError, aiohttp.ClientError):
                pass  # one side hung up on a watch stream: nothing is left to relay
            return response
