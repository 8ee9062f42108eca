"""An asyncio event loop on a daemon thread, for code that Spark calls synchronously.

Spark calls a stream reader's methods one at a time on the Python worker's main thread;
NSQ connections must keep reading (heartbeats, deliveries) between those calls. They live
on this loop, and every reader call crosses over with :meth:`LoopThread.call`, so the
connections and the messages they hold are only ever touched by the loop's thread.
"""
from __future__ import annotations

import asyncio
import threading
from typing import Any, Awaitable, Callable, TypeVar

T = TypeVar("T")


class LoopThread:
    def __init__(self, name: str) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_forever()
        finally:
            self.loop.close()

    def run(self, coroutine: Awaitable[T], timeout: float | None = None) -> T:
        """Run ``coroutine`` on the loop and wait for its result (or exception)."""
        async def wrapped() -> T:
            return await coroutine
        future = asyncio.run_coroutine_threadsafe(wrapped(), self.loop)
        try:
            return future.result(timeout)
        except TimeoutError:
            future.cancel()
            raise

    def call(self, function: Callable[..., T], *args: Any, timeout: float | None = 60.0) -> T:
        """Run a plain function on the loop's thread and return what it returns."""
        async def invoke() -> T:
            return function(*args)
        return self.run(invoke(), timeout)

    def stop(self, timeout: float = 10.0) -> None:
        if self.loop.is_running():
            self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout)
