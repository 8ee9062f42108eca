"""Admin-action notifications: each action is POSTed as one JSON object to
``--notification-http-endpoint``, with Go nsqadmin's fields, from a background task so
that an action's answer never waits on the endpoint."""
from __future__ import annotations

import asyncio
import base64
import binascii
import json
import logging
import socket
import time
from typing import Any

import aiohttp
from aiohttp import web

QUEUE_LIMIT = 1000


def basic_auth_user(request: web.Request) -> str:
    """The user name of an ``Authorization: Basic`` header, or ""."""
    scheme, _, encoded = request.headers.get("Authorization", "").partition(" ")
    if scheme != "Basic" or not encoded:
        return ""
    try:
        pair = base64.b64decode(encoded, validate=True).decode("utf-8", "replace")
    except (binascii.Error, ValueError):
        return ""
    user, sep, _ = pair.partition(":")
    return user if sep else ""


def remote_address(request: web.Request) -> str:
    """``ip:port`` of the peer, as Go's ``RemoteAddr``."""
    peer = request.transport.get_extra_info("peername") if request.transport else None
    if isinstance(peer, tuple) and len(peer) >= 2:
        host = f"[{peer[0]}]" if ":" in str(peer[0]) else str(peer[0])
        return f"{host}:{peer[1]}"
    return request.remote or ""


def admin_action(action: str, topic: str, channel: str, node: str, request: web.Request,
                 now: float | None = None) -> dict[str, Any]:
    """The notification of ``action``; ``channel``, ``node`` and ``user`` only when set."""
    secure = request.secure or request.headers.get("X-Scheme") == "https"
    url = f"{'https' if secure else 'http'}://{request.host}{request.rel_url.raw_path}"
    if request.rel_url.raw_query_string:
        url += "?" + request.rel_url.raw_query_string
    body: dict[str, Any] = {"action": action, "topic": topic}
    if channel:
        body["channel"] = channel
    if node:
        body["node"] = node
    body["timestamp"] = int(time.time() if now is None else now)
    user = basic_auth_user(request)
    if user:
        body["user"] = user
    body.update(remote_ip=remote_address(request), user_agent=request.headers.get("User-Agent", ""),
                url=url, via=socket.gethostname())
    return body


class Notifier:
    """Queues notifications and POSTs them in order; a failed POST is logged and dropped."""

    def __init__(self, endpoint: str, session: aiohttp.ClientSession, logger: logging.Logger,
                 timeout: float = 5.0) -> None:
        self.endpoint = endpoint
        self.session = session
        self.log = logger
        self.timeout = aiohttp.ClientTimeout(total=timeout)
        self._queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue(QUEUE_LIMIT)
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self.endpoint and self._task is None:
            self._task = asyncio.create_task(self._run(), name="nsqadmin-notifications")

    async def stop(self) -> None:
        """Sends what is queued, for at most about one request timeout, then stops."""
        if self._task is None:
            return
        try:
            await asyncio.wait_for(self._queue.join(), (self.timeout.total or 5.0) + 1.0)
        except TimeoutError:
            self.log.warning("stopping with %d notifications unsent", self._queue.qsize())
        self._task.cancel()
        try:
            await self._task
        except asyncio.CancelledError:
            pass
        self._task = None

    def notify(self, action: dict[str, Any]) -> None:
        if not self.endpoint:
            return
        try:
            self._queue.put_nowait(action)
        except asyncio.QueueFull:
            self.log.warning("notification queue full, dropping %s", action["action"])

    async def _run(self) -> None:
        while True:
            action = await self._queue.get()
            try:
                await self._post(action)
            finally:
                self._queue.task_done()

    async def _post(self, action: dict[str, Any]) -> None:
        body = json.dumps(action, separators=(",", ":")).encode()
        try:
            async with self.session.post(self.endpoint, data=body, timeout=self.timeout,
                                         headers={"Content-Type": "application/json"}) as resp:
                if resp.status >= 300:
                    self.log.error("notification %s to %s: HTTP %d", action["action"], self.endpoint, resp.status)
        except (aiohttp.ClientError, TimeoutError) as e:
            self.log.error("failed to POST notification %s to %s - %s", action["action"], self.endpoint, e)
