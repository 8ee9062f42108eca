"""Process-level shutdown: SIGTERM/SIGINT start the graceful stop of consumers and
producers (Kubernetes sends SIGTERM, a terminal sends SIGINT).

    async def main() -> None:
        consumer = Consumer("events", "archive", config, handler=handle)
        await consumer.connect_to_lookupd("lookupd:4161")
        await run_until_signalled(consumer)   # returns once the consumer has stopped

Unix only (it uses the event loop's signal handlers, so it must run in the main thread).
"""
from __future__ import annotations

import asyncio
import logging
import signal
from typing import Any, Callable, Protocol, Sequence

log = logging.getLogger("nsq_client")

DEFAULT_SIGNALS: tuple[signal.Signals, ...] = (signal.SIGTERM, signal.SIGINT)


class Stoppable(Protocol):
    async def stop(self) -> Any: ...


def stop_on_signals(*stoppables: Stoppable, signals: Sequence[signal.Signals] = DEFAULT_SIGNALS,
                    on_done: Callable[[signal.Signals], None] | None = None) -> Callable[[], None]:
    """On the first of ``signals``, stop every stoppable concurrently (later signals are
    logged and ignored: each stop has its own deadline). ``on_done`` is called with the
    signal once every stop returned. Returns a function that removes the handlers."""
    loop = asyncio.get_running_loop()
    state: dict[str, asyncio.Task[None]] = {}

    async def stop_all(received: signal.Signals) -> None:
        results = await asyncio.gather(*(s.stop() for s in stoppables), return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException):
                log.error("stopping on %s failed: %r", received.name, result)
        if on_done is not None:
            on_done(received)

    def handle(received: signal.Signals) -> None:
        if "stop" in state:
            log.warning("%s received while stopping: already stopping", received.name)
            return
        log.info("%s received: stopping", received.name)
        state["stop"] = loop.create_task(stop_all(received), name="nsq-signal-stop")

    for sig in signals:
        loop.add_signal_handler(sig, handle, sig)

    def remove() -> None:
        for sig in signals:
            loop.remove_signal_handler(sig)
    return remove


async def run_until_signalled(*stoppables: Stoppable,
                              signals: Sequence[signal.Signals] = DEFAULT_SIGNALS) -> signal.Signals:
    """Wait for one of ``signals``, stop every stoppable, and return the signal received."""
    done: asyncio.Future[signal.Signals] = asyncio.get_running_loop().create_future()

    def stopped(received: signal.Signals) -> None:
        if not done.done():
            done.set_result(received)

    remove = stop_on_signals(*stoppables, signals=signals, on_done=stopped)
    try:
        return await done
    finally:
        remove()
