"""Drain: take this nsqd out of service without losing a message, then stop it.

A drain starts with ``POST /drain`` (HTTP), with SIGTERM or SIGINT, and runs once:

1. every topic and channel is unregistered from every lookupd and stays unregistered
   (reconnections register nothing), so consumers and lookupd-aware producers move away;
2. new publishes are refused (``E_PUB_FAILED``/``E_MPUB_FAILED``/``E_DPUB_FAILED`` over
   TCP, ``503 DRAINING`` over HTTP) so multi-node producers fail over, unless
   ``--drain-accept-publishes`` keeps accepting and persisting them (the node comes
   back on the same disk); new SUBs are refused;
3. every subscribed consumer is treated as if it had sent CLS: nothing new is sent to
   it, its FIN, REQ and TOUCH are still answered;
4. it waits up to ``--drain-timeout`` for the messages in flight to consumers still
   connected; a consumer is disconnected as soon as it holds none (clients that never
   send CLS are closed cleanly this way); what is still in flight at the timeout is
   requeued;
5. everything is written to disk with the metadata (NSQD.stop) and the process exits 0.

``GET /drain`` reports the state, ``GET /ready`` answers 503 from the moment a drain
starts (``/ping`` stays liveness until exit), ``/stats?format=json`` holds the same
``drain`` object. A second signal during the wait cuts it short.
"""
from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING

from .client_conn import ClientState

if TYPE_CHECKING:
    from .nsqd import NSQD

log = logging.getLogger("nsqd")

SETTLE_CHECK_INTERVAL = 0.05  # how often the wait looks at in-flight counts and consumers
PROGRESS_LOG_INTERVAL = 1.0


class Drain:
    def __init__(self, nsqd: "NSQD") -> None:
        self.nsqd = nsqd
        self.started_at: float | None = None
        self.finished_at: float | None = None
        self.in_flight_at_timeout: int | None = None
        self._task: asyncio.Task[None] | None = None
        self._cut_short = asyncio.Event()

    @property
    def draining(self) -> bool:
        return self.started_at is not None

    @property
    def refuses_publishes(self) -> bool:
        return self.draining and not self.nsqd.options.drain_accept_publishes

    def start(self) -> None:
        """Begin the drain (at most once); a call while one runs cuts its wait short."""
        if self._task is not None:
            log.info("DRAIN: asked again, not waiting any longer for messages in flight")
            self._cut_short.set()
            return
        self.started_at = time.time()
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        nsqd = self.nsqd
        log.info("DRAIN: started (timeout %.1fs, %s publishes)", nsqd.options.drain_timeout,
                 "accepting" if nsqd.options.drain_accept_publishes else "refusing")
        if nsqd.lookup is not None:
            nsqd.lookup.withdraw(self._all_registrations())
        self._stop_consumers()
        await self._wait_for_in_flight()
        await nsqd.stop()
        self.finished_at = time.time()
        log.info("DRAIN: done in %.2fs, %d messages persisted",
                 self.finished_at - (self.started_at or self.finished_at), nsqd.persisted_count or 0)

    def _all_registrations(self) -> list[tuple[str, str | None]]:
        """Channels first, then their topics: lookupd forgets a producer's topic and each
        of its channels separately."""
        out: list[tuple[str, str | None]] = []
        for topic in self.nsqd.topics.values():
            out.extend((topic.name, channel) for channel in topic.channels)
        out.extend((topic.name, None) for topic in self.nsqd.topics.values())
        return out

    def _stop_consumers(self) -> None:
        for client in self.nsqd.clients.values():
            if client.state == ClientState.SUBSCRIBED:
                client.state = ClientState.CLOSING
                client.ready_count = 0

    def in_flight_left(self) -> int:
        """Messages in flight to consumers still connected: only those can still be FINed."""
        return sum(c.in_flight_count for c in self.nsqd.clients.values() if c.channel is not None)

    def _close_settled_consumers(self) -> None:
        for client in list(self.nsqd.clients.values()):
            if client.channel is not None and client.in_flight_count == 0 and not client.closed:
                log.info("DRAIN: [%s] nothing left in flight, disconnecting", client)
                client.close()

    async def _wait_for_in_flight(self) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.nsqd.options.drain_timeout
        next_log = loop.time()
        while True:
            self._close_settled_consumers()
            left = self.in_flight_left()
            now = loop.time()
            if left == 0:
                log.info("DRAIN: nothing in flight")
                return
            if now >= deadline or self._cut_short.is_set():
                self.in_flight_at_timeout = left
                log.info("DRAIN: %d messages still in flight, requeueing them", left)
                return
            if now >= next_log:
                log.info("DRAIN: %d messages in flight, %.1fs left", left, deadline - now)
                next_log = now + PROGRESS_LOG_INTERVAL
            try:
                await asyncio.wait_for(self._cut_short.wait(), min(SETTLE_CHECK_INTERVAL, deadline - now))
            except asyncio.TimeoutError:
                pass

    def state(self) -> dict:
        return {
            "draining": self.draining,
            "started_at": self.started_at,
            "finished_at": self.finished_at,
            "accept_publishes": self.nsqd.options.drain_accept_publishes,
            "timeout": self.nsqd.options.drain_timeout,
            "in_flight": self.in_flight_left(),
            "in_flight_requeued_at_timeout": self.in_flight_at_timeout,
            "messages_persisted": self.nsqd.persisted_count,
        }
