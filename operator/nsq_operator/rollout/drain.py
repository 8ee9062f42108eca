"""nsqd's drain as the roller uses it (through NsqdAdmin): start a plain drain at most
once (a second plain POST /drain would cut the first one's wait short), start or retry a
scale-down drain with its handoff, read the state, and tell a finished drain from an
nsqd that is simply gone (nothing listens any more)."""
from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, Sequence

import aiohttp

from nsq_client.admin import NsqdAdmin
from nsq_client.errors import NsqClientError


class NoAnswer(Exception):
    """The nsqd did not answer (slow, stopped, partitioned, refusing): it may still be draining."""


@dataclass(frozen=True)
class Handoff:
    finished: bool  # this attempt is over
    error: str | None  # None when everything was handed off
    messages_left: int  # still on the leaving nsqd's disk


@dataclass(frozen=True)
class DrainState:
    draining: bool
    finished: bool
    in_flight: int
    handoff: Handoff | None  # None for a plain drain

    @classmethod
    def parse(cls, raw: dict[str, Any]) -> "DrainState":
        handoff = raw.get("handoff")
        return cls(draining=bool(raw.get("draining")), finished=raw.get("finished_at") is not None,
                   in_flight=int(raw.get("in_flight") or 0),
                   handoff=Handoff(bool(handoff.get("finished")), handoff.get("error"),
                                   int(handoff.get("messages_left") or 0)) if isinstance(handoff, dict) else None)


def http_address(url: str) -> str:
    """``host:port`` of an nsqd's HTTP API, as a handoff names its targets."""
    return url.split("://", 1)[-1].rstrip("/")


class DrainClient:
    def __init__(self, admin: NsqdAdmin) -> None:
        self.admin = admin

    async def _answer(self, call: Any) -> DrainState | None:
        """The state; None when nothing listens any more (the process is gone)."""
        try:
            return DrainState.parse(await call)
        except aiohttp.ClientConnectorError:
            return None
        except (NsqClientError, aiohttp.ClientError, asyncio.TimeoutError, ValueError) as e:
            raise NoAnswer(str(e) or repr(e)) from None

    async def state(self) -> DrainState | None:
        return await self._answer(self.admin.drain_state())

    async def start(self) -> DrainState | None:
        """A plain drain, unless one runs already."""
        now = await self.state()
        if now is None or now.draining:
            return now
        return await self._answer(self.admin.drain())

    async def hand_off(self, targets: Sequence[str]) -> DrainState | None:
        """Start a scale-down drain handing the backlog to ``targets`` (host:port), or
        retry a failed handoff; changes nothing while one runs or after it succeeded."""
        return await self._answer(self.admin.drain(handoff=targets))
