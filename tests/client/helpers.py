"""Waiting on conditions from async tests, and reading nsqd's stats without blocking the
event loop the client runs on."""
from __future__ import annotations

import asyncio
import inspect
import time
from typing import Any, Awaitable, Callable, TypeVar

from nsq_client import NsqdAdmin
from tests.servers import Nsqd

T = TypeVar("T")


async def eventually(predicate: Callable[[], T | Awaitable[T]], timeout: float = 10.0,
                     message: str = "condition") -> T:
    """Poll ``predicate`` until it returns something truthy; AssertionError after ``timeout``."""
    deadline = time.monotonic() + timeout
    last: BaseException | None = None
    while True:
        try:
            value = predicate()
            if inspect.isawaitable(value):
                value = await value
            if value:
                return value  # type: ignore[return-value]
        except (AssertionError, OSError) as err:
            last = err
        if time.monotonic() > deadline:
            raise AssertionError(f"{message} not met within {timeout}s" + (f" (last: {last!r})" if last else ""))
        await asyncio.sleep(0.02)


async def channel_stats(nsqd: Nsqd, topic: str, channel: str,
                        admin: NsqdAdmin | None = None) -> dict[str, Any] | None:
    if admin is None:
        async with NsqdAdmin(nsqd.http_address) as own:
            stats = await own.stats(topic=topic, channel=channel)
    else:
        stats = await admin.stats(topic=topic, channel=channel)
    for t in stats.get("topics") or []:
        if t["topic_name"] == topic:
            for c in t["channels"]:
                if c["channel_name"] == channel:
                    return c
    return None


async def topic_stats(nsqd: Nsqd, topic: str) -> dict[str, Any] | None:
    async with NsqdAdmin(nsqd.http_address) as admin:
        stats = await admin.stats(topic=topic)
    return next((t for t in stats.get("topics") or [] if t["topic_name"] == topic), None)


async def topic_message_count(nsqd: Nsqd, topic: str) -> int:
    t = await topic_stats(nsqd, topic)
    return int(t["message_count"]) if t else 0
