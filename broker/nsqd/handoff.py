"""The handoff of a scale-down drain: a drained node's backlog, read from its disk, is
published to other nsqds over their HTTP API, then removed here.

For every topic in the metadata file (``nsqd.dat``), one at a time:

1. a target is chosen round-robin over the targets (those that failed earlier in this
   attempt are tried last); the topic and each of its channels are created there first
   (``/topic/create``, ``/channel/create``) so the target's fan-out reaches every channel;
2. the backlog (backlog.py) is streamed: due messages in ``/mpub?binary=true`` batches,
   deferred ones one by one with ``/pub?defer=<ms left>``; when the target refuses or
   cannot be reached, the batch and everything after it go to the next target (prepared
   the same way); when none is left the topic fails and stays on disk;
3. once every message of the topic was acknowledged, its queue files and deferral
   sidecars are deleted, then the metadata file is rewritten without the topic.

A crash at any point loses nothing: the files stay until step 3, so a message may at
worst be published twice.

Not carried over: paused flags (the target's own stand), and ephemeral topics and
channels, which keep nothing on disk (a drain drops their messages, as NSQ does). A
target whose --max-req-timeout is shorter than a message's delay left refuses it like
any other refusal.
"""
from __future__ import annotations

import asyncio
import logging
import os
import ssl
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from contextlib import closing

from nsq_protocol.commands import encode_mpub_body
from nsq_protocol.host_port import split_dial_address

from . import metadata
from .backlog import BacklogMessage, backlog_depth, read_backlog, topic_queues
from .deferrals import deferrals_path
from .diskqueue import delete_queue_files
from .http_client import HttpClient, HttpClientError

BATCH_MESSAGES = 1000  # bodies per MPUB
BATCH_BYTES = 1 << 20  # MPUB body size, well under nsqd's default --max-body-size (5 MiB)


class TargetError(Exception):
    """A target refused a request or could not be reached."""


class HandoffError(Exception):
    """No target took a topic's backlog."""


def parse_targets(value: str) -> list[str]:
    """``host:port[,host:port...]`` (other nsqds' HTTP addresses), without repeats; a
    target may be ``https://host:port`` (an nsqd whose plain HTTP is closed, verified
    against --tls-root-ca-file). Raises ValueError when one is not ``host:port`` or none
    is given."""
    targets: list[str] = []
    for address in (part.strip() for part in value.split(",")):
        if not address:
            continue
        try:
            split_dial_address(address.removeprefix("https://"))
        except ValueError as e:
            raise ValueError(f"not host:port: {address!r} ({e})") from None
        if address not in targets:
            targets.append(address)
    if not targets:
        raise ValueError("no target given")
    return targets


class Target:
    """One recipient nsqd's HTTP API."""

    def __init__(self, address: str, http: HttpClient) -> None:
        self.address = address
        self._url = address if address.startswith("https://") else f"http://{address}"
        self._http = http

    async def prepare(self, topic: str, channels: Sequence[str]) -> None:
        await self._post("/topic/create", {"topic": topic})
        for channel in channels:
            await self._post("/channel/create", {"topic": topic, "channel": channel})

    async def publish_many(self, topic: str, bodies: Sequence[bytes]) -> None:
        await self._post("/mpub", {"topic": topic, "binary": "true"}, encode_mpub_body(bodies))

    async def publish_deferred(self, topic: str, body: bytes, defer_ms: int) -> None:
        await self._post("/pub", {"topic": topic, "defer": str(defer_ms)}, body)

    async def _post(self, path: str, params: dict[str, str], body: bytes = b"") -> None:
        try:
            answer = await self._http.request("POST", self._url + path, params=params, body=body)
        except HttpClientError as e:
            raise TargetError(f"{self.address} unreachable: {e}") from None
        if not 200 <= answer.status < 300:
            detail = answer.body[:200].decode("utf-8", "replace").strip()
            raise TargetError(f"{self.address} answered {path} with {answer.status} {detail}")


class TopicSender:
    """Sends one topic's backlog to the first of ``targets`` that takes it, failing over."""

    def __init__(self, topic: str, channels: Sequence[str], targets: Iterable[Target],
                 on_target_failed: Callable[[Target], None], logger: logging.Logger) -> None:
        self.topic = topic
        self._channels = list(channels)
        self._untried = list(targets)
        self._current: Target | None = None
        self._on_target_failed = on_target_failed
        self._log = logger
        self._errors: list[str] = []
        self.used: list[str] = []  # targets that took part of the backlog, in order

    async def prepare(self) -> None:
        """Have a target ready (the topic and its channels created there), even for an empty
        backlog: the channels move with the topic."""
        if self._current is None:
            await self._next_target()

    async def send(self, call: Callable[[Target], Awaitable[None]]) -> None:
        while True:
            target = self._current or await self._next_target()
            try:
                await call(target)
                return
            except TargetError as e:
                self._failed(target, e)

    async def _next_target(self) -> Target:
        while self._untried:
            target = self._untried.pop(0)
            try:
                await target.prepare(self.topic, self._channels)
            except TargetError as e:
                self._failed(target, e)
                continue
            self._current = target
            self.used.append(target.address)
            self._log.info("HANDOFF: topic %s goes to %s", self.topic, target.address)
            return target
        raise HandoffError("; ".join(self._errors) or "no target")

    def _failed(self, target: Target, error: TargetError) -> None:
        self._log.warning("HANDOFF: topic %s: %s", self.topic, error)
        self._errors.append(str(error))
        self._current = None
        self._on_target_failed(target)


async def send_backlog(sender: TopicSender, backlog: Iterable[BacklogMessage]) -> int:
    """Publish every message of ``backlog`` through ``sender``, a batch at a time; how many."""
    topic = sender.topic
    batch: list[bytes] = []
    batch_bytes = 0
    count = 0
    for message in backlog:
        if message.defer_ms > 0:
            await sender.send(_publish_deferred(topic, message))
            count += 1
            continue
        if batch and (len(batch) >= BATCH_MESSAGES or batch_bytes + len(message.body) > BATCH_BYTES):
            await sender.send(_publish_many(topic, batch))
            count += len(batch)
            batch, batch_bytes = [], 0
        batch.append(message.body)
        batch_bytes += len(message.body)
    if batch:
        await sender.send(_publish_many(topic, batch))
        count += len(batch)
    return count


def _publish_many(topic: str, bodies: list[bytes]) -> Callable[[Target], Awaitable[None]]:
    return lambda target: target.publish_many(topic, bodies)


def _publish_deferred(topic: str, message: BacklogMessage) -> Callable[[Target], Awaitable[None]]:
    return lambda target: target.publish_deferred(topic, message.body, message.defer_ms)


class Handoff:
    """The handoff of one node's data directory, and its state for ``GET /drain``.

    ``run`` makes one attempt over every topic still on disk; after a failure another
    ``run`` (with the same or other targets) retries what is left."""

    def __init__(self, data_path: str | os.PathLike[str], *, version: str, min_msg_size: int,
                 max_msg_size: int, connect_timeout: float, request_timeout: float,
                 on_topic_removed: Callable[[str], None], logger: logging.Logger,
                 ssl_context: ssl.SSLContext | None = None,
                 forget: Callable[[str], Awaitable[None]] | None = None) -> None:
        """``ssl_context``: what https:// targets are verified with (None: the system's CAs).
        ``forget``: awaited for each topic handed off and removed here (a replicated topic's
        backups forget their copies of it, which were handed off with the rest)."""
        self._data_path = data_path
        self._version = version
        self._min_msg_size = min_msg_size
        self._max_msg_size = max_msg_size
        self._connect_timeout = connect_timeout
        self._request_timeout = request_timeout
        self._on_topic_removed = on_topic_removed
        self._forget = forget
        self._log = logger
        self._ssl = ssl_context
        self.targets: list[str] = []
        self.attempts = 0
        self.started_at: float | None = None
        self.finished_at: float | None = None
        self.error: str | None = None
        self.handed_off: dict[str, int] = {}  # topic -> messages the targets acknowledged
        self._left: dict[str, int] = {}  # topic still on disk -> its messages, counted per queue

    @property
    def running(self) -> bool:
        return self.started_at is not None and self.finished_at is None

    @property
    def failed(self) -> bool:
        return self.finished_at is not None and self.error is not None

    async def run(self) -> None:
        self.attempts += 1
        self.started_at, self.finished_at, self.error = time.time(), None, None
        failures: list[str] = []
        try:
            topics = metadata.read(self._data_path)
            self._left = {t.name: backlog_depth(self._data_path, t.name, [c.name for c in t.channels])
                          for t in topics}
            self._log.info("HANDOFF: %d topics, %d messages on disk (counted per queue), to %s",
                           len(topics), sum(self._left.values()), ", ".join(self.targets))
            http = HttpClient(connect_timeout=self._connect_timeout, request_timeout=self._request_timeout,
                              ssl_context=self._ssl, user_agent=f"nsqd/{self._version}")
            try:
                targets = [Target(address, http) for address in self.targets]
                failed_targets: set[str] = set()
                for index, topic in enumerate(topics):
                    # round-robin, with targets that already failed in this attempt last
                    order = targets[index % len(targets):] + targets[:index % len(targets)]
                    order.sort(key=lambda t: t.address in failed_targets)
                    try:
                        await self._hand_off_topic(topic, order, lambda t: failed_targets.add(t.address))
                    except (HandoffError, OSError, ValueError) as e:
                        self._log.error("HANDOFF: topic %s stays here: %s", topic.name, e)
                        failures.append(f"topic {topic.name}: {e}")
            finally:
                await http.close()
        except asyncio.CancelledError:
            failures.append("interrupted")
            raise
        except Exception as e:
            self._log.exception("HANDOFF: failed")
            failures.append(f"{type(e).__name__}: {e}")
        finally:
            self.finished_at = time.time()
            self.error = "; ".join(failures) or None
        self._log.info("HANDOFF: %s in %.2fs, %d messages handed off, %d topics left",
                       "failed" if self.error else "done", self.finished_at - self.started_at,
                       sum(self.handed_off.values()), len(self._left))

    async def _hand_off_topic(self, topic: metadata.TopicMeta, order: list[Target],
                              on_target_failed: Callable[[Target], None]) -> None:
        channels = [c.name for c in topic.channels]
        sender = TopicSender(topic.name, channels, order, on_target_failed, self._log)
        backlog = read_backlog(self._data_path, topic.name, channels, min_msg_size=self._min_msg_size,
                               max_msg_size=self._max_msg_size, logger=self._log)
        with closing(backlog):
            await sender.prepare()
            count = await send_backlog(sender, backlog)
        self._remove(topic)
        if self._forget is not None:
            try:
                await self._forget(topic.name)
            except Exception as e:  # handed off all the same: the copies kept are duplicates, not loss
                self._log.warning("HANDOFF: topic %s: its backups may keep their copies: %s", topic.name, e)
        self.handed_off[topic.name] = count
        self._left.pop(topic.name, None)
        self._log.info("HANDOFF: topic %s: %d messages handed off to %s, removed here",
                       topic.name, count, ", ".join(sender.used))

    def _remove(self, topic: metadata.TopicMeta) -> None:
        """The files first, then the metadata: a crash in between leaves an empty topic."""
        for queue in topic_queues(topic.name, [c.name for c in topic.channels]):
            delete_queue_files(self._data_path, queue)
            deferrals_path(self._data_path, queue).unlink(missing_ok=True)
        remaining = [t for t in metadata.read(self._data_path) if t.name != topic.name]
        metadata.write(self._data_path, remaining, self._version)
        self._on_topic_removed(topic.name)

    def state(self) -> dict:
        return {
            "targets": self.targets,
            "started_at": self.started_at,
            "finished_at": self.finished_at,
            "finished": self.finished_at is not None,
            "error": self.error,
            "attempts": self.attempts,
            "topics": dict(self.handed_off),
            "messages": sum(self.handed_off.values()),
            "topics_left": sorted(self._left),
            "messages_left": sum(self._left.values()),
        }
