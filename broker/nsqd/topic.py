"""A topic: takes published messages and gives every channel its own copy.

While the topic is paused, has no channel yet, or has not started (a new topic first
asks lookupd which channels to create), messages wait in the topic's own queue (memory,
then backend) and flow to the channels once they can. A deferred message (DPUB) that
waits in the backend has its due time in ``deferrals``.

A message is queued and handed to channels as its bare payload (one ``bytes`` shared by
every channel); only a deferred one (DPUB) is a ``Message``, which carries its delay.

Durable mode (a ``DurableDiskQueue`` backend, no memory queue): an entry read from the
topic's queue is acknowledged as soon as it has been appended to every channel's queue;
the group committer makes those appends durable before it persists that progress.
"""
from __future__ import annotations

import asyncio
import logging
import time
from typing import Callable

from nsq_protocol.names import is_ephemeral

from .backend import Backend
from .channel import Channel
from .deferrals import DeferralStore
from .durable_queue import DurableDiskQueue
from .message import ID_SLICE, MESSAGE_OVERHEAD, Message, Payload, check_payload, item_payload
from .payload_queue import PayloadQueue
from .payload_run import PayloadRun, Payloads

log = logging.getLogger("nsqd")

FLUSH_BATCH = 2048  # messages moved from the topic queue to channels per loop iteration


class Topic:
    replicated = False  # kept on several nsqds (docs/replication.md): set by nsqd at creation

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
        self.memory = PayloadQueue()
        self.paused = False
        self.started = False
        self.exiting = False
        self.message_count = 0
        self.message_bytes = 0
        self._flush_scheduled = False

    @property
    def depth(self) -> int:
        return self.memory.length + self.backend.depth

    # -- publishing -----------------------------------------------------------
    def put(self, item: Payload | Message) -> None:
        """One message: a fresh payload, or a ``Message`` (deferred when its ``defer`` is set)."""
        self.message_count += 1
        self.message_bytes += len(item.payload if item.__class__ is Message else item) - MESSAGE_OVERHEAD  # type: ignore[union-attr,arg-type]
        if self._straight_to_channels():
            self._fan_out(item)
        else:
            self._enqueue(item)
            self._schedule_flush()

    def put_payloads(self, payloads: Payloads) -> None:
        """An MPUB's fresh messages: every channel takes the batch at once."""
        self._count(payloads)
        if self._straight_to_channels():
            for channel in list(self.channels.values()):
                channel.put_payloads(payloads)
            return
        room = self.mem_queue_size - self.memory.length
        if room >= len(payloads):
            self.memory.extend(payloads)
        else:
            if room > 0:
                self.memory.extend(payloads[:room])
            self.backend.put_many(list(payloads[max(0, room):]))
        self._schedule_flush()

    def put_in_memory(self, payloads: Payloads) -> bool:
        """Fresh messages, put only if every one stays in a memory queue (so putting them
        cannot fail on a disk); False, with nothing put, otherwise."""
        count = len(payloads)
        if self._straight_to_channels():
            channels = list(self.channels.values())
            for channel in channels:
                if not channel.fits_in_memory(count):
                    return False
            self._count(payloads)
            for channel in channels:
                channel.put_payloads(payloads)
            return True
        if self.memory.length + count > self.mem_queue_size:
            return False
        self._count(payloads)
        self.memory.extend(payloads)
        self._schedule_flush()
        return True

    def _count(self, payloads: Payloads) -> None:
        self.message_count += len(payloads)
        self.message_bytes += (payloads.body_bytes if payloads.__class__ is PayloadRun  # type: ignore[union-attr]
                               else sum(map(len, payloads)) - MESSAGE_OVERHEAD * len(payloads))

    def _flowing(self) -> bool:
        return self.started and not self.paused and not self.exiting and bool(self.channels)

    def _straight_to_channels(self) -> bool:
        """A fresh message skips the topic's queues: it flows and nothing older waits."""
        return self._flowing() and not self.memory.length and not self.backend.depth

    def _enqueue(self, item: Payload | Message) -> None:
        if self.memory.length < self.mem_queue_size:
            self.memory.append(item)
            return
        if item.__class__ is Message and item.defer > 0 and self.deferrals is not None:  # type: ignore[union-attr]
            self.deferrals.record(item.id, time.time() + item.defer)  # type: ignore[union-attr]
        self.backend.put(item_payload(item))

    def _fan_out(self, item: Payload | Message) -> None:
        channels = list(self.channels.values())
        if item.__class__ is not Message:
            for channel in channels:
                channel.put(item)
            return
        msg: Message = item  # type: ignore[assignment]
        if msg.defer <= 0:
            for channel in channels:
                channel.put(msg.encode())
            return
        for i, channel in enumerate(channels):
            channel.put_deferred(msg if i == 0 else msg.copy(), msg.defer)

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
            if not self.backend.depth and self.memory.head_is_fresh():
                channels = list(self.channels.values())
                for batch in self.memory.popleft_fresh(FLUSH_BATCH - moved):
                    for channel in channels:
                        channel.put_payloads(batch)
                    moved += len(batch)
                continue
            if self._durable is None and self.backend.depth and not (self.deferrals is not None and len(self.deferrals)):
                run = self.backend.get_many(FLUSH_BATCH - moved)  # type: ignore[attr-defined]
                for channel in list(self.channels.values()):
                    channel.put_payloads(run)
                moved += len(run)
                if run:
                    continue
            queued = self._next_queued()
            if queued is None:
                return
            item, token = queued
            self._fan_out(item)
            if token is not None and self._durable is not None:
                self._durable.ack(token)
            moved += 1
        if self.depth:
            self._schedule_flush()

    def _next_queued(self) -> tuple[Payload | Message, int | None] | None:
        """The next queued message and, in durable mode, the entry to acknowledge once
        the channels have it."""
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
                payload = check_payload(data)
            except Exception as e:
                log.error("TOPIC(%s): dropping undecodable message from disk: %s", self.name, e)
                if durable is not None and token is not None:
                    durable.ack(token)
                continue
            if self.deferrals is not None:
                msg_id = payload[ID_SLICE]
                defer = self.deferrals.remaining(msg_id)
                if defer > 0:
                    self.deferrals.forget(msg_id)
                    msg = Message.from_payload(payload)
                    msg.defer = defer
                    return msg, token
            return payload, token
        if self.memory.length:
            return self.memory.popleft(), None
        return None

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
        return sum(job() for job in self.persist_jobs())

    def persist_jobs(self) -> list[Callable[[], int]]:
        """Shutdown, as independent jobs (each returns how many messages it wrote): one per
        channel and one for the topic's own queue. Nothing flows once this is called."""
        self.exiting = True
        return [*(channel.persist for channel in self.channels.values()), self._persist_own]

    def _persist_own(self) -> int:
        pending = list(self.memory)
        self.memory.clear()
        try:
            if pending:
                if self.deferrals is not None:
                    now = time.time()
                    for item in pending:
                        if item.__class__ is Message and item.defer > 0:  # type: ignore[union-attr]
                            self.deferrals.record(item.id, now + item.defer)  # type: ignore[union-attr]
                self.backend.put_many([item_payload(item) for item in pending])
        finally:
            if self.deferrals is not None:
                self.deferrals.close()
            self.backend.close()
        return len(pending)

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
