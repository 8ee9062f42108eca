"""nsqd's drain over HTTP, as the roller uses it: start a drain at most once (a second
POST /drain would cut the first one's wait short), read its state, and tell a finished
drain from an nsqd that is simply gone.

GET /drain answers ``{"draining", "started_at", "finished_at", "in_flight", ...}`` and,
for a scale-down drain, ``"handoff": {"finished", "error", ...}``."""
from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, Sequence

import aiohttp


class NoAnswer(Exception):
    """The nsqd did not answer (slow, stopped, partitioned): it may still be draining."""


@dataclass(frozen=True)
class Handoff:
    finished: bool
    error: str | None
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def stranded(self) -> int:
        """Messages the handoff could not move, as far as the nsqd tells."""
        for key in ("stranded", "remaining", "messages_left", "left"):
            if isinstance(self.details.get(key), int):
                return int(self.details[key])
        return 0


@dataclass(frozen=True)
class DrainState:
    draining: bool
    finished: bool
    in_flight: int
    handoff: Handoff | None

    @classmethod
    def parse(cls, raw: dict[str, Any]) -> "DrainState":
        handoff = raw.get("handoff")
        return cls(draining=bool(raw.get("draining")), finished=raw.get("finished_at") is not None,
                   in_flight=int(raw.get("in_flight") or 0),
                   handoff=Handoff(bool(handoff.get("finished")), handoff.get("error"), dict(handoff))
                   if isinstance(handoff, dict) else None)


def http_address(url: str) -> str:
    """``host:port`` of an nsqd's HTTP API, as a handoff names its recipients."""
    return url.split("://", 1)[-1].rstrip("/")


class DrainClient:
    def __init__(self, url: str, session: aiohttp.ClientSession) -> None:
        self.url = url.rstrip("/")
        self.session = session

    async def _call(self, method: str, params: dict[str, str] | None = None) -> DrainState | None:
        """The state; None when nothing listens any more (the process is gone)."""
        try:
            async with self.session.request(method, self.url + "/drain", params=params) as response:
                if response.status >= 400:
                    raise NoAnswer(f"{method} {self.url}/drain answered {response.status}: {(await response.text())[:200]}")
                return DrainState.parse(await response.json(content_type=None))
        except aiohttp.ClientConnectorError:
            return None
        except (aiohttp.ClientError, asyncio.TimeoutError, ValueError) as e:
            raise NoAnswer(f"{method} {self.url}/drain: {e!r}") from None

    async def state(self) -> DrainState | None:
        return await self._call("GET")

    async def start(self, handoff_to: Sequence[str] | None = None) -> DrainState | None:
        """Start a drain unless one runs already; ``handoff_to``: recipients' host:port."""
        now = await self.state()
        if now is None or now.draining:
            return now
        params = {"handoff": ",".join(handoff_to)} if handoff_to else None
        return await self._call("POST", params)
