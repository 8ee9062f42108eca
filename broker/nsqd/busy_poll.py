"""Keeps the event loop awake for a short window after network input.

A client that waits for each answer (PUB, then OK, then the next PUB) sends its next
command a few microseconds after nsqd answered. If the event loop has gone to sleep in
epoll by then, the kernel (and, on a virtual machine, the hypervisor) must wake it, which
costs more than the command itself. Go's runtime avoids this by spinning briefly before
parking an idle thread; this does the same for the asyncio loop: while input arrived in
the last ``window`` seconds, a callback stays scheduled, so the loop polls its sockets
without blocking. It costs nothing once the connections are quiet for longer than the
window. (Yielding the CPU on each turn with sched_yield was tried: it gave back most of
the gain on a 2-core machine where the client shares the cores.)
"""
from __future__ import annotations

import asyncio
import time
from typing import Callable


class BusyPoller:
    def __init__(self, loop: asyncio.AbstractEventLoop, window: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._loop = loop
        self._window = window
        self._clock = clock
        self._poked = False
        self._spinning = False
        self._until = 0.0

    def poke(self) -> None:
        """Input arrived: keep polling for another window (called on every read, so cheap)."""
        self._poked = True
        if not self._spinning:
            self._spinning = True
            self._loop.call_soon(self._spin)

    def _spin(self) -> None:
        now = self._clock()
        if self._poked:
            self._poked = False
            self._until = now + self._window
        elif now >= self._until:
            self._spinning = False
            return
        self._loop.call_soon(self._spin)

    @property
    def spinning(self) -> bool:
        return self._spinning
