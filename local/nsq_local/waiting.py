"""Waiting on a condition with a deadline, and asking a node's HTTP endpoint for its status."""
from __future__ import annotations

import asyncio
import time
from typing import Awaitable, Callable

import aiohttp

POLL_INTERVAL = 0.05


class NotReachedError(TimeoutError):
    """A condition did not hold before its deadline."""


async def wait_until(check: Callable[[], Awaitable[bool]], timeout: float, what: str,
                     interval: float = POLL_INTERVAL) -> None:
    """Call ``check`` until it returns True; :class:`NotReachedError` after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while not await check():
        if time.monotonic() > deadline:
            raise NotReachedError(f"{what}: not within {timeout:g}s")
        await asyncio.sleep(interval)


async def http_status(session: aiohttp.ClientSession, url: str, method: str = "GET",
                      timeout: float = 2.0) -> int | None:
    """The status ``url`` answers with; None when nothing answers."""
    try:
        async with session.request(method, url, timeout=aiohttp.ClientTimeout(total=timeout)) as resp:
            await resp.read()
            return resp.status
    except (aiohttp.ClientError, asyncio.TimeoutError):
        return None
