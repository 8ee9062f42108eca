"""A topic: takes published messages and gives every channel its own copy.

While the topic is paused, has no channel yet, or has not started (a new topic first
asks lookupd which channels to create), messages wait in the topic's own queue (memory,
then backend) and flow to the channels once they can. A deferred message (DPUB) that
waits in the backend has its due time in ``deferrals``.

Durable mode (a ``DurableDiskQueue`` backend, no memory queue): an entry read from the
topic's queue is acknowledged as soon as it has been appended to every channel's queue;
the group committer makes those appends durable before it persists that progress.
"""
from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from typing import Callable, Iterable

from nsq_protocol.names import is_ephemeral

from .backend import Backend
from .channel import Channel
from .deferrals import DeferralStore
from .durable_queue import DurableDiskQueue
from .message import Message

log = logging.getLogger("nsqd")

FLUSH_BATCH = 512  # messages moved from the topic queue to channels per loop iteration


class Topic:
    def __init__(self, name: str, backend: Backend, *, mem_queue_size: int,
                 channel_factory: Callable[["Topic", str], Channel],
                 deferrals: DeferralStore | None = None,
                 on_channel_added: Callable[["Topic", Channel], None] | None = None,
                 on_channel_removed: Callable[["Topic", Channel], None] | None = None,
                 on_ephemeral_empty: Callable[["Topic"], None] | None = None) -> None:
        self.name = name
        self.ephemeral = is_ephemeral(name)
        self.backend = backend
        self.deferrals = deferrals
        self._durable = backend if isinstance(backend, DurableDiskQueue) else None
        if self._durable is not None:
            self._durable.on_readable = self._schedule_flush
        self.mem_queue_size = mem_queue_size
        self._channel_factory = channel_factory
        self._on_channel_added = on_channel_added
        self._on_channel_removed = on_channel_removed
        self._on_ephemeral_empty = on_ephemeral_empty

        self.channels: dict[str, Channel] = {}
        self.memory: deque[Message] = deque()
        self.paused = False
        self.started = False
        self.exiting = False
        self.message_count = 0
        self.message_bytes = 0
        self._flush_scheduled = False

    @property
    def depth(self) -> int:
        return len(self.memory) + self.backend.depth

    # -- publishing -----------------------------------------------------------
    def put(self, msg: Message) -> None:
        self.message_count += 1
        self.message_bytes += len(msg.body)
        if self._flowing() and not self.memory and not self.backend.depth:
            self._fan_out(msg)
        else:
            self._enqueue(msg)
            self._schedule_flush()

    def put_many(self, msgs: Iterable[Message]) -> None:
        for msg in msgs:
            self.put(msg)

    def _flowing(self) -> bool:
        return self.started and not self.paused and not self.exiting and bool(self.channels)

    def _enqueue(self, msg: Message) -> None:
        if len(self.memory) < self.mem_queue_size:
            self.memory.append(msg)
        else:
            if msg.defer > 0 and self.deferrals is not None:
                self.deferrals.record(msg.id, time.time() + msg.defer)
            self.backend.put(msg.encode())

    def _fan_out(self, msg: Message) -> None:
        first = True
        for channel in list(self.channels.values()):
            copy = msg if first else msg.copy()
            first = False
            if msg.defer > 0:
                channel.put_deferred(copy, msg.defer)
            else:
                channel.put(copy)

    def _schedule_flush(self) -> None:
        if self._flush_scheduled or not self._flowing():
            return
        self._flush_scheduled = True
        asyncio.get_running_loop().call_soon(self._flush)

    def _flush(self) -> None:
        """Move queued messages to the channels, a batch per loop iteration."""
        self._flush_scheduled = False
        moved = 0
        while moved < FLUSH_BATCH and self._flowing():
            msg = self._next_queued()
            if msg is None:
                return
            token, msg.disk_token = msg.disk_token, None
            self._fan_out(msg)
            if token is not None and self._durable is not None:
                self._durable.ack(token)
            moved += 1
        if self.depth:
            self._schedule_flush()

    def _next_queued(self) -> Message | None:
        # the backend holds what overflowed earlier, so it goes first
        durable = self._durable
        while self.backend.depth:
            token: int | None = None
            if durable is not None:
                entry = durable.get_entry()
                if entry is None:
                    break
                data, token = entry
            else:
                data = self.backend.get()
                if data is None:
                    break
            try:
                msg = Message.decode(data)
            except Exception as e:
                log.error("TOPIC(%s): dropping undecodable message from disk: %s", self.name, e)
                if durable is not None and token is not None:
                    durable.ack(token)
                continue
            msg.disk_token = token
            if self.deferrals is not None:
                msg.defer = self.deferrals.remaining(msg.id)
                self.deferrals.forget(msg.id)
            return msg
        return self.memory.popleft() if self.memory else None

    # -- lifecycle -------------------------------------------------------------
    def start(self) -> None:
        self.started = True
        self._schedule_flush()

    def pause(self) -> None:
        self.paused = True

    def unpause(self) -> None:
        self.paused = False
        self._schedule_flush()

    def empty(self) -> None:
        self.memory.clear()
        self.backend.empty()
        if self.deferrals is not None:
            self.deferrals.clear()

    # -- channels --------------------------------------------------------------
    def get_channel(self, name: str) -> Channel:
        channel = self.channels.get(name)
        if channel is None:
            channel = self._channel_factory(self, name)
            self.channels[name] = channel
            if self._on_channel_added is not None:
                self._on_channel_added(self, channel)
            self._schedule_flush()
        return channel

    def delete_channel(self, name: str) -> Channel:
        channel = self.channels.pop(name)  # KeyError for an unknown channel
        channel.delete()
        if self._on_channel_removed is not None:
            self._on_channel_removed(self, channel)
        if not self.channels and self.ephemeral and self._on_ephemeral_empty is not None:
            self._on_ephemeral_empty(self)
        return channel

    def persist(self) -> int:
        """Shutdown: every channel writes what it holds to disk, then the topic does."""
        self.exiting = True
        written = sum(ch.persist() for ch in self.channels.values())
        pending = list(self.memory)
        self.memory.clear()
        try:
            if pending:
                if self.deferrals is not None:
                    now = time.time()
                    for msg in pending:
                        if msg.defer > 0:
                            self.deferrals.record(msg.id, now + msg.defer)
                self.backend.put_many([m.encode() for m in pending])
                written += len(pending)
        finally:
            if self.deferrals is not None:
                self.deferrals.close()
            self.backend.close()
        return written

    def delete(self) -> None:
        self.exiting = True
        for channel in list(self.channels.values()):
            channel.delete()
        self.channels.clear()
        self.memory.clear()
        self.backend.delete()
        if self.deferrals is not None:
            self.deferrals.delete()

    def __repr__(self) -> str:
        return f"Topic({self.name})"
