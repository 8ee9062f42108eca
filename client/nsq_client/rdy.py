"""RDY management across a consumer's connections, as go-nsq does it.

``max_in_flight`` is split across connections (the remainder goes to the first ones);
the sum of RDY counts never exceeds it. With more connections than ``max_in_flight``
(or while backing off over several connections) a periodic redistribution takes RDY
from connections idle for ``low_rdy_idle_timeout`` (or holding it for longer than
``low_rdy_timeout``) and gives it to those without, longest-waiting first. Backoff sets
every connection to RDY 0, then probes with RDY 1 on one connection.
"""
from __future__ import annotations

import asyncio
import logging
import random
import time
from typing import Mapping

from .backoff import Action, BackoffState, Signal
from .conn import Connection
from .errors import NotConnectedError

log = logging.getLogger("nsq_client")

PROBE_RETRY_DELAY = 1.0  # go-nsq's wait before retrying a probe that could not be sent


def split_max_in_flight(max_in_flight: int, connections: int) -> list[int]:
    """Each connection's share, in connection order: ``[4, 3, 3]`` for 10 over 3, ``[1, 1, 0]``
    for 2 over 3."""
    if connections <= 0:
        return []
    base, extra = divmod(max_in_flight, connections)
    return [base + (1 if i < extra else 0) for i in range(connections)]


class RdyManager:
    def __init__(self, max_in_flight: int, low_rdy_idle_timeout: float, low_rdy_timeout: float,
                 connections: Mapping[str, Connection], backoff: BackoffState) -> None:
        self.max_in_flight = max_in_flight
        self.low_rdy_idle_timeout = low_rdy_idle_timeout
        self.low_rdy_timeout = low_rdy_timeout
        self.backoff = backoff
        self._conns = connections
        self._need_redistribute = False
        self._probe_handle: asyncio.TimerHandle | None = None
        self._rng = random.Random()

    @property
    def total_rdy(self) -> int:
        return sum(c.rdy_count for c in self._conns.values())

    def _live(self) -> list[Connection]:
        return [c for c in self._conns.values() if not c.is_closing]

    # -- setting one connection -----------------------------------------------
    def update(self, conn: Connection, count: int) -> bool:
        """Set ``conn``'s RDY to ``count`` within what max_in_flight leaves; False when
        nothing could be given (redistribution will see to it)."""
        if conn.is_closing:
            return False
        count = max(0, min(count, conn.max_rdy))
        if count > conn.rdy_count:  # lowering is always allowed; raising only within the budget
            possible = self.max_in_flight - self.total_rdy + conn.rdy_count
            count = min(count, possible)
            if count <= conn.rdy_count:
                if conn.rdy_count == 0:
                    self._need_redistribute = True
                return False
        if count == conn.rdy_count:
            return True
        try:
            conn.send_rdy(count)
        except NotConnectedError:
            return False
        return True

    def rebalance(self) -> None:
        """Give every connection its share (not while backing off); lowered counts first,
        so that what they free is there for the raised ones."""
        if self.backoff.in_backoff or self.backoff.waiting:
            return
        live = self._live()
        targets = list(zip(live, split_max_in_flight(self.max_in_flight, len(live))))
        for conn, share in sorted(targets, key=lambda t: t[1] - t[0].rdy_count):
            self.update(conn, share)

    def set_max_in_flight(self, max_in_flight: int) -> None:
        self.max_in_flight = max_in_flight
        self.rebalance()
        self._need_redistribute = True

    # -- periodic redistribution ------------------------------------------------
    def redistribute(self) -> None:
        if self.backoff.waiting:
            return
        live = self._live()
        if not live:
            return
        in_backoff = self.backoff.in_backoff
        if len(live) > self.max_in_flight or (in_backoff and len(live) > 1):
            self._need_redistribute = True
        if not self._need_redistribute:
            return
        self._need_redistribute = False
        if not in_backoff and len(live) <= self.max_in_flight:
            self.rebalance()  # everyone can have a share: a blocked raise just needs a retry
            return
        now = time.monotonic()
        for conn in live:
            if conn.rdy_count <= 0:
                continue
            idle = now - max(conn.last_message_time, conn.last_rdy_time)
            held = now - conn.last_rdy_time
            if idle > self.low_rdy_idle_timeout or held > self.low_rdy_timeout:
                log.debug("(%s) idle %.1fs, held RDY %.1fs: RDY 0", conn.address, idle, held)
                self.update(conn, 0)
        available = (1 if in_backoff else self.max_in_flight) - self.total_rdy
        waiting = sorted((c for c in live if c.rdy_count == 0), key=lambda c: c.last_rdy_time)
        for conn in waiting[:max(available, 0)]:
            self.update(conn, 1)

    # -- backoff ----------------------------------------------------------------
    def signal(self, signal: Signal) -> None:
        decision = self.backoff.signal(signal)
        if decision.action is Action.EXIT:
            log.info("exiting backoff, every connection back to its share of RDY %d", self.max_in_flight)
            self.rebalance()
        elif decision.action is Action.ENTER:
            log.warning("backing off for %.3fs (level %d): RDY 0 everywhere", decision.duration,
                        self.backoff.level)
            for conn in self._live():
                self.update(conn, 0)
            self._schedule_probe(decision.duration)

    def _schedule_probe(self, delay: float) -> None:
        if self._probe_handle is not None:
            self._probe_handle.cancel()
        self._probe_handle = asyncio.get_running_loop().call_later(delay, self._probe)

    def _probe(self) -> None:
        """The backoff wait is over: let one message through on one connection."""
        self._probe_handle = None
        live = self._live()
        if not live:
            self._schedule_probe(PROBE_RETRY_DELAY)
            return
        self.backoff.wait_over()
        choice = live[self._rng.randrange(len(live))]
        if not self.update(choice, 1):
            self.backoff.waiting = True
            self._schedule_probe(PROBE_RETRY_DELAY)

    def close(self) -> None:
        if self._probe_handle is not None:
            self._probe_handle.cancel()
            self._probe_handle = None
