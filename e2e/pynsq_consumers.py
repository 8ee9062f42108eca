"""pynsq consumers for end-to-end tests: pynsq's ``nsq.Reader`` (PyPI ``pynsq``, a
client that never sends CLS) finding its nsqds through nsqlookupd, run in a child
interpreter because it needs tornado's loop; every delivery comes back here.

    consumers = PynsqConsumers([("orders", "archive")], cluster.lookupd_http_addresses,
                               workdir=tmp_path, on_delivery=lambda d: ...)
    await consumers.start()               # returns once the Readers exist
    ...                                   # consumers.deliveries(), consumers.events()
    await consumers.wait_until(lambda: len(consumers.deliveries()) >= 10, 10, "10 messages")
    await consumers.stop()                # Readers closed (no CLS), the child exits

A :class:`Delivery` is one message as a Reader got it: topic, channel, the nsqd's TCP
address (``host:port`` as lookupd broadcast it), nsqd's message ID, attempts, body.
A :class:`ConnectionEvent` is a Reader's connection to an nsqd opening ("connected"),
closing ("closed") or an error pynsq reported on it ("error", with pynsq's error class
name as ``kind``: ``Error`` for an nsqd error frame, ``SendError`` for a FIN/REQ that
could not be written, ``IntegrityError``/``ConnectionClosedError`` for a closed socket).

Handling: every message is finished at once, or after ``handle_seconds[(topic,
channel)]`` (a slow consumer: at most about max_in_flight / seconds messages a second;
:meth:`PynsqConsumers.catch_up` makes it answer at once from then on), or never
(``mode="hold"``: a handler that never answers, nsqd's msg-timeout or a drain must deal
with its messages).
"""
from __future__ import annotations

import asyncio
import base64
import json
import os
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Literal, Sequence

READER_SCRIPT = Path(__file__).with_name("pynsq_reader.py")
START_TIMEOUT = 20.0

Mode = Literal["finish", "hold"]


@dataclass(frozen=True)
class Delivery:
    topic: str
    channel: str
    nsqd: str           # TCP address of the nsqd that sent it
    message_id: str     # nsqd's 16-character message ID
    attempts: int
    body: bytes


@dataclass(frozen=True)
class ConnectionEvent:
    kind: Literal["connected", "closed", "error"]
    topic: str
    channel: str
    nsqd: str
    error_kind: str = ""  # pynsq's error class, for "error"
    error: str = ""
    at: float = 0.0       # time.monotonic() when this process read it


class PynsqConsumers:
    def __init__(self, subscriptions: Sequence[tuple[str, str]], lookupd_http_addresses: Sequence[str],
                 workdir: Path, *, readers: int = 1, max_in_flight: int = 100,
                 lookupd_poll_interval: int = 1, mode: Mode = "finish",
                 handle_seconds: dict[tuple[str, str], float] | None = None,
                 on_delivery: Callable[[Delivery], None] | None = None,
                 tls_ca_file: str | None = None, auth_secret: str = "") -> None:
        """``readers`` pynsq Readers for each (topic, channel) of ``subscriptions``, each
        with ``max_in_flight`` and polling the lookupds every ``lookupd_poll_interval``
        whole seconds. ``on_delivery`` is called in this event loop for each delivery as
        it is read. The child's stderr (pynsq's log) goes to ``workdir``."""
        self.settings = {
            "subscriptions": [list(s) for s in subscriptions],
            "lookupd_http_addresses": list(lookupd_http_addresses),
            "readers": readers, "max_in_flight": max_in_flight,
            "lookupd_poll_interval": lookupd_poll_interval, "mode": mode,
            "handle_seconds": {f"{t}/{c}": s for (t, c), s in (handle_seconds or {}).items()},
            "tls_ca_file": tls_ca_file, "auth_secret": auth_secret,
        }
        self.stderr_path = workdir / f"pynsq-consumers-{id(self)}.stderr"
        self._on_delivery = on_delivery
        self._deliveries: list[Delivery] = []
        self._events: list[ConnectionEvent] = []
        self._started = asyncio.Event()
        self._proc: asyncio.subprocess.Process | None = None
        self._reading: asyncio.Task[None] | None = None

    # -- life ---------------------------------------------------------------------------------
    async def start(self) -> None:
        """Start the child and return once its Readers exist (they connect on their first
        lookupd poll, right after)."""
        with open(self.stderr_path, "ab") as stderr:
            self._proc = await asyncio.create_subprocess_exec(
                sys.executable, str(READER_SCRIPT), json.dumps(self.settings),
                stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=stderr,
                start_new_session=True, limit=1 << 20)
        self._reading = asyncio.create_task(self._read(self._proc), name="pynsq-consumers-stdout")
        await self.wait_until(self._started.is_set, START_TIMEOUT, "pynsq Readers started")

    def catch_up(self) -> None:
        """Slow handlers answer at once from now on."""
        self._signal(signal.SIGUSR1)

    async def stop(self, timeout: float = 10.0) -> int | None:
        """SIGTERM (the Readers close their connections), SIGKILL after ``timeout``; every
        line the child wrote is read. Its exit code (None if it was not running)."""
        proc = self._proc
        if proc is None:
            return None
        if proc.returncode is None:
            self._signal(signal.SIGTERM)
            try:
                async with asyncio.timeout(timeout):
                    await proc.wait()
            except asyncio.TimeoutError:
                self._signal(signal.SIGKILL)
                await proc.wait()
        if self._reading is not None:
            await self._reading
        return proc.returncode

    async def kill(self) -> None:
        """SIGKILL: the Readers vanish without closing anything (what they held is nsqd's
        to time out or requeue)."""
        if self._proc is not None and self._proc.returncode is None:
            self._signal(signal.SIGKILL)
            await self._proc.wait()
        if self._reading is not None:
            await self._reading

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.returncode is None

    def _signal(self, sig: int) -> None:
        if self.running:
            assert self._proc is not None
            os.killpg(self._proc.pid, sig)

    # -- what the Readers saw --------------------------------------------------------------------
    def deliveries(self) -> list[Delivery]:
        return list(self._deliveries)

    def events(self, kind: str | None = None) -> list[ConnectionEvent]:
        return [e for e in self._events if kind is None or e.kind == kind]

    def stderr_tail(self, chars: int = 4000) -> str:
        try:
            return self.stderr_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def describe(self) -> str:
        code = self._proc.returncode if self._proc else None
        return (f"pynsq consumers (exit {code}, {len(self._deliveries)} deliveries, "
                f"{len(self._events)} connection events); stderr tail:\n{self.stderr_tail()}")

    async def wait_until(self, condition: Callable[[], bool], timeout: float, what: str) -> None:
        """Wait until ``condition()`` holds; AssertionError after ``timeout`` seconds or as
        soon as the child exits without it holding."""
        deadline = time.monotonic() + timeout
        while not condition():
            if self._reading is not None and self._reading.done():
                self._reading.result()  # what stopped the reading (a line not understood, say) is raised here
            if self._proc is not None and self._proc.returncode is not None and self._reading is not None:
                await self._reading
                if condition():
                    return
                raise AssertionError(f"child exited before {what}: {self.describe()}")
            if time.monotonic() > deadline:
                raise AssertionError(f"not within {timeout:g}s: {what}; {self.describe()}")
            await asyncio.sleep(0.05)

    async def _read(self, proc: asyncio.subprocess.Process) -> None:
        assert proc.stdout is not None
        async for line in proc.stdout:
            try:
                record = json.loads(line)
            except ValueError:
                raise RuntimeError(f"pynsq consumers wrote a line that is not JSON: {line[:200]!r}") from None
            event = record.pop("event")
            if event == "message":
                delivery = Delivery(topic=record["topic"], channel=record["channel"], nsqd=record["nsqd"],
                                    message_id=record["id"], attempts=int(record["attempts"]),
                                    body=base64.b64decode(record["body"]))
                self._deliveries.append(delivery)
                if self._on_delivery is not None:
                    self._on_delivery(delivery)
            elif event == "started":
                self._started.set()
            else:
                self._events.append(ConnectionEvent(
                    kind=event, topic=record["topic"], channel=record["channel"], nsqd=record["nsqd"],
                    error_kind=record.get("kind", ""), error=record.get("error", ""), at=time.monotonic()))
