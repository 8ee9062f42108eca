"""Drain: take this nsqd out of service without losing a message, then stop it (or, for a
scale-down, hand its backlog to other nsqds).

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
``drain`` object. A second signal, or a second plain ``POST /drain``, during the wait
cuts it short.

Scale-down: ``POST /drain?handoff=<host:port>[,<host:port>...]`` drains a node that will
not come back (the addresses are other nsqds' HTTP APIs):

* steps 1 to 4 as above, except that publishes are refused even with
  ``--drain-accept-publishes`` (the node is leaving);
* step 5 persists everything to disk as above, but the process does not exit: TCP is
  closed and the HTTP API stays up. From then on ``GET /drain``, ``GET /ready`` (503),
  ``/ping``, ``/info``, ``/stats``, ``/metrics`` and ``POST /drain`` are served and every
  other endpoint answers ``503 {"message":"EXITING"}``; SIGTERM or SIGINT exits 0 at
  once (so a container restarted before the operator removes the pod never takes
  publishes on a disk about to be deleted). A signal while the handoff runs stops it:
  what was not handed off stays on disk;
* the backlog is handed off from disk (handoff.py: every topic's union of its own queue
  and its channels' queues, to one target per topic, round-robin, failing over), and
  each topic's files are removed here once a target has acknowledged all of it;
* ``GET /drain`` gains a ``handoff`` object (null for a plain drain): ``targets``,
  ``finished`` (this attempt is over), ``error`` (null when everything was handed off,
  else why not), ``topics`` (messages handed off per topic), ``messages`` (their sum),
  ``topics_left`` and ``messages_left`` (still on this disk, counted per queue),
  ``attempts``, ``started_at``, ``finished_at``;
* after a failure the data stays on disk and another ``POST /drain?handoff=...``
  retries (with the targets it names). While a drain waits, ``POST /drain?handoff=...``
  sets the targets (a plain drain becomes a scale-down one); while a handoff runs or
  after it succeeded it changes nothing. Once a plain drain has begun to stop it answers
  ``503 EXITING``.

What a scale-down delivers: at least once, never lost. A message waiting in one channel
is published once to the target's topic, so every channel there receives it, including
channels that had already finished it here (duplicates). Deferred messages keep the
delay they had left. On the target messages get new IDs, timestamps and attempt counts.
"""
from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Sequence

from .client_conn import ClientState
from .handoff import Handoff
from .tls import handoff_context
from .message import MESSAGE_OVERHEAD

if TYPE_CHECKING:
    from .nsqd import NSQD

log = logging.getLogger("nsqd")

SETTLE_CHECK_INTERVAL = 0.05  # how often the wait looks at in-flight counts and consumers
PROGRESS_LOG_INTERVAL = 1.0


class DrainRefused(Exception):
    """A drain request that cannot be followed; ``code`` is the HTTP API's error code."""

    def __init__(self, code: str) -> None:
        super().__init__(code)
        self.code = code


class Drain:
    def __init__(self, nsqd: "NSQD") -> None:
        self.nsqd = nsqd
        self.started_at: float | None = None
        self.finished_at: float | None = None
        self.in_flight_at_timeout: int | None = None
        self.handoff: Handoff | None = None  # set for a scale-down drain
        self._task: asyncio.Task[None] | None = None
        self._handoff_task: asyncio.Task[None] | None = None
        self._exit_task: asyncio.Task[None] | None = None
        self._cut_short = asyncio.Event()

    @property
    def draining(self) -> bool:
        return self.started_at is not None

    @property
    def refuses_publishes(self) -> bool:
        # asked on every publish: ``draining`` read in place, not through its property
        return self.started_at is not None and (
            self.handoff is not None or not self.nsqd.options.drain_accept_publishes)

    @property
    def persisted(self) -> bool:
        """Everything is on disk and only the HTTP API still serves (a scale-down drain)."""
        return self.handoff is not None and self.finished_at is not None

    def on_signal(self) -> None:
        """SIGTERM or SIGINT: begin the drain, or cut its wait short; once a scale-down drain
        has persisted everything, exit at once."""
        if self.persisted:
            if self._exit_task is None:
                log.info("DRAIN: signalled after the drain, exiting")
                self._exit_task = self.nsqd.watch(asyncio.get_running_loop().create_task(self._exit()),
                                                  "DRAIN: the exit after the drain")
            return
        self._begin_or_cut_short()

    def request(self, handoff: Sequence[str] = ()) -> None:
        """``POST /drain``, with the handoff's targets for a scale-down (see the module's
        docstring for what a request does at each stage). Raises DrainRefused."""
        if not handoff:
            self._begin_or_cut_short()
            return
        if self.nsqd.exiting and self.handoff is None:
            raise DrainRefused("EXITING")
        if self.handoff is None:
            self.handoff = self._new_handoff()
        if not self.persisted:
            self.handoff.targets = list(handoff)
            if self._task is None:
                self._begin()
        elif self.handoff.failed and (self._handoff_task is None or self._handoff_task.done()):
            self.handoff.targets = list(handoff)
            log.info("DRAIN: retrying the handoff")
            self._start_handoff()

    def _new_handoff(self) -> Handoff:
        o = self.nsqd.options
        return Handoff(self.nsqd.data_path, version=self.nsqd.version, min_msg_size=MESSAGE_OVERHEAD,
                       max_msg_size=o.max_msg_size + MESSAGE_OVERHEAD,
                       connect_timeout=o.http_client_connect_timeout,
                       request_timeout=o.http_client_request_timeout,
                       on_topic_removed=self._topic_removed, logger=log, ssl_context=handoff_context(o),
                       forget=self.nsqd.replicator.forget_topic if self.nsqd.replicator is not None else None)

    def _topic_removed(self, name: str) -> None:
        self.nsqd.topics.pop(name, None)

    def _begin_or_cut_short(self) -> None:
        if self._task is None:
            self._begin()
        elif self.finished_at is None:
            log.info("DRAIN: asked again, not waiting any longer for messages in flight")
            self._cut_short.set()

    def _begin(self) -> None:
        self.started_at = time.time()
        self._task = self.nsqd.watch(asyncio.get_running_loop().create_task(self._run()), "DRAIN: the drain")

    async def _run(self) -> None:
        nsqd = self.nsqd
        log.info("DRAIN: started (timeout %.1fs, %s publishes%s)", nsqd.options.drain_timeout,
                 "accepting" if not self.refuses_publishes else "refusing",
                 ", handing off to " + ", ".join(self.handoff.targets) if self.handoff else "")
        if nsqd.lookup is not None:
            nsqd.lookup.withdraw(self._all_registrations())
        self._stop_consumers()
        await self._wait_for_in_flight()
        await nsqd.stop(keep_http=self.handoff is not None)
        self.finished_at = time.time()
        log.info("DRAIN: done in %.2fs, %d messages persisted",
                 self.finished_at - (self.started_at or self.finished_at), nsqd.persisted_count or 0)
        if self.handoff is not None:
            self._start_handoff()

    def _start_handoff(self) -> None:
        assert self.handoff is not None
        self._handoff_task = self.nsqd.watch(asyncio.get_running_loop().create_task(self.handoff.run()),
                                             "HANDOFF: the handoff")

    async def _exit(self) -> None:
        if self._handoff_task is not None and not self._handoff_task.done():
            self._handoff_task.cancel()
            await asyncio.gather(self._handoff_task, return_exceptions=True)
        await self.nsqd.close_http()

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
                async with asyncio.timeout(min(SETTLE_CHECK_INTERVAL, deadline - now)):
                    await self._cut_short.wait()
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
            "handoff": self.handoff.state() if self.handoff is not None else None,
        }
