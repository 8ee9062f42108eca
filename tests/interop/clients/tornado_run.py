"""Run tornado's loop (pynsq's) until a deadline or SIGTERM, whichever comes first.

``nsq.run()`` sets a plain ``signal.signal`` handler that calls ``IOLoop.stop()``; on an
asyncio-backed loop that only takes effect at the next timer, seconds later. asyncio's
own signal handler wakes the loop at once.
"""
from __future__ import annotations

import signal

import tornado.ioloop


def run_until_stopped(loop: tornado.ioloop.IOLoop, deadline: float) -> None:
    asyncio_loop = loop.asyncio_loop  # type: ignore[attr-defined]
    for sig in (signal.SIGTERM, signal.SIGINT):
        asyncio_loop.add_signal_handler(sig, loop.stop)
    loop.call_later(deadline, loop.stop)
    loop.start()
