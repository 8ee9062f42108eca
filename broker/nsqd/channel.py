"""A channel: one copy of a topic's stream, shared by its consumers.

Messages wait in a memory deque (up to --mem-queue-size), then in the backend; a
delivered message sits in the in-flight queue until FIN, REQ or its timeout; REQ with a
delay and DPUB park messages in the deferred queue. Delivery is pushed: whenever a
message or a consumer's capacity appears, ``pump`` hands messages to ready consumers in
turn.

Durable mode (a ``DurableDiskQueue`` backend): new messages, deferred ones included, go
straight to disk; a message read from disk keeps its entry's token while it is in
flight, requeued (in memory) or deferred, and the entry is acknowledged only at FIN.
The ``deferrals`` store remembers due times so a deferred message read back from disk
waits its remaining time.
"""
from __future__ import annotations

import asyncio
import logging
import random
import time
from collections import deque
from typing import TYPE_CHECKING, Callable

from nsq_protocol.names import is_ephemeral

from .backend import Backend
from .deferrals import DeferralStore
from .durable_queue import DurableDiskQueue
from .e2e_latency import LatencyWindow
from .message import MAX_ATTEMPTS, Message
from .pqueue import DeferredQueue, InFlightQueue

if TYPE_CHECKING:
    from .client_conn import ClientConn

log = logging.getLogger("nsqd")


class ChannelError(Exception):
    """FIN/REQ/TOUCH of a message the client does not hold."""


class Channel:
    def __init__(self, topic_name: str, name: str, backend: Backend, *, mem_queue_size: int,
                 max_msg_timeout: float, deferrals: DeferralStore | None = None,
                 on_ephemeral_empty: Callable[["Channel"], None] | None = None) -> None:
        self.topic_name = topic_name
        self.name = name
        self.ephemeral = is_ephemeral(name)
        self.backend = backend
        self.deferrals = deferrals
        self._durable = backend if isinstance(backend, DurableDiskQueue) else None
        if self._durable is not None:
            self._durable.on_readable = self._schedule_pump
        self.mem_queue_size = mem_queue_size
        self.max_msg_timeout = max_msg_timeout
        self._on_ephemeral_empty = on_ephemeral_empty

        self.memory: deque[Message] = deque()
        self.in_flight = InFlightQueue()
        self.deferred = DeferredQueue()
        self.clients: dict[int, ClientConn] = {}
        self._rotation: list[ClientConn] = []
        self._next = 0
        self._pump_scheduled = False
        self._from_backend = False  # alternate memory/backend reads when both hold messages

        self.paused = False
        self.exiting = False
        self.message_count = 0
        self.requeue_count = 0
        self.timeout_count = 0
        self.e2e_latency: LatencyWindow | None = None  # publish-to-FIN times, when tracked

    # -- queue ----------------------------------------------------------------
    @property
    def depth(self) -> int:
        return len(self.memory) + self.backend.depth

    def put(self, msg: Message) -> None:
        self.message_count += 1
        self._enqueue(msg)
        self._schedule_pump()

    def _schedule_pump(self) -> None:
        """Deliver on the next loop turn: a publisher's OK leaves before the message
        reaches a consumer on the same connection, and an MPUB is pumped once."""
        if not self._pump_scheduled:
            self._pump_scheduled = True
            asyncio.get_running_loop().call_soon(self._scheduled_pump)

    def _scheduled_pump(self) -> None:
        self._pump_scheduled = False
        self.pump()

    def put_deferred(self, msg: Message, delay: float) -> None:
        self.message_count += 1
        if self._durable is not None and self.deferrals is not None:
            # on disk before the publisher hears OK; read back into the deferred queue
            self.deferrals.record(msg.id, time.time() + delay)
            self._durable.put(msg.encode())
        else:
            self.deferred.push(msg, time.monotonic() + delay)

    def _enqueue(self, msg: Message) -> None:
        # a message read from a durable queue is still on disk: it stays in memory
        if msg.disk_token is not None or len(self.memory) < self.mem_queue_size:
            self.memory.append(msg)
        else:
            self.backend.put(msg.encode())

    def _next_message(self) -> Message | None:
        backend = self.backend
        if self.memory and not (self._from_backend and backend.depth):
            self._from_backend = True
            return self.memory.popleft()
        self._from_backend = False
        if backend.depth:
            return self._read_backend()
        return self.memory.popleft() if self.memory else None

    def _read_backend(self) -> Message | None:
        """The next message from disk; None when there is none to deliver right now (it
        was undecodable, or it is deferred and went to the deferred queue)."""
        durable = self._durable
        token: int | None = None
        if durable is not None:
            entry = durable.get_entry()
            if entry is None:
                return None
            data, token = entry
        else:
            data = self.backend.get()
            if data is None:
                return None
        try:
            msg = Message.decode(data)
        except Exception as e:  # a corrupt entry must not stop delivery
            log.error("CHANNEL(%s:%s): dropping undecodable message from disk: %s",
                      self.topic_name, self.name, e)
            if durable is not None and token is not None:
                durable.ack(token)
            return None
        msg.disk_token = token
        if self.deferrals is not None:
            left = self.deferrals.remaining(msg.id)
            if left > 0:
                self.deferred.push(msg, time.monotonic() + left)
                return None
        return msg

    # -- consumers ------------------------------------------------------------
    def add_client(self, client: "ClientConn") -> None:
        if client.id not in self.clients:
            self.clients[client.id] = client
            self._rotation.append(client)

    def remove_client(self, client_id: int) -> None:
        client = self.clients.pop(client_id, None)
        if client is None:
            return
        self._rotation.remove(client)
        if not self.clients and self.ephemeral and self._on_ephemeral_empty is not None:
            self._on_ephemeral_empty(self)

    def pump(self) -> None:
        """Hand queued messages to consumers with spare RDY, one each in turn."""
        if self.paused or self.exiting:
            return
        rotation = self._rotation
        n = len(rotation)
        if not n:
            return
        idle = 0
        i = self._next
        while idle < n and (self.memory or self.backend.depth):
            client = rotation[i % n]
            i += 1
            if not client.ready_for_message():
                idle += 1
                continue
            idle = 0
            msg = self._next_message()
            if msg is None:
                continue
            self._deliver(client, msg)
        self._next = i % n if n else 0

    def _deliver(self, client: "ClientConn", msg: Message) -> None:
        if client.sample_rate and random.randrange(100) >= client.sample_rate:
            return  # sampled out: this consumer's channel skips the message
        if msg.attempts < MAX_ATTEMPTS:
            msg.attempts += 1
        now = time.monotonic()
        msg.client_id = client.id
        msg.delivered_at = now
        self.in_flight.push(msg, now + client.msg_timeout, client.msg_timeout)
        client.send_message(msg)

    # -- FIN / REQ / TOUCH ----------------------------------------------------
    def _owned(self, client_id: int, msg_id: bytes) -> Message:
        msg = self.in_flight.get(msg_id)
        if msg is None:
            raise ChannelError("ID not in flight")
        if msg.client_id != client_id:
            raise ChannelError("client does not own message")
        return msg

    def finish(self, client_id: int, msg_id: bytes) -> Message:
        msg = self._owned(client_id, msg_id)
        self.in_flight.remove(msg_id)
        if msg.disk_token is not None and self._durable is not None:
            self._durable.ack(msg.disk_token)
        if self.deferrals is not None:
            self.deferrals.forget(msg_id)
        if self.e2e_latency is not None:
            self.e2e_latency.add(time.time() - msg.timestamp / 1e9)
        return msg

    def requeue(self, client_id: int, msg_id: bytes, delay: float) -> None:
        msg = self._owned(client_id, msg_id)
        self.in_flight.remove(msg_id)
        self.requeue_count += 1
        if delay > 0:
            self.deferred.push(msg, time.monotonic() + delay)
            if self._durable is not None and self.deferrals is not None:
                self.deferrals.record(msg_id, time.time() + delay)
        else:
            self._enqueue(msg)

    def touch(self, client_id: int, msg_id: bytes, timeout: float) -> None:
        msg = self._owned(client_id, msg_id)
        now = time.monotonic()
        deadline = now + timeout
        cap = msg.delivered_at + self.max_msg_timeout
        if deadline > cap:
            self.in_flight.retime(msg, cap, timeout, in_order=False)
        else:
            self.in_flight.retime(msg, deadline, timeout, in_order=True)

    # -- the queue scan's work ------------------------------------------------
    def process_in_flight(self, now: float) -> bool:
        expired = self.in_flight.pop_expired(now)
        for msg in expired:
            self.timeout_count += 1
            client = self.clients.get(msg.client_id)
            if client is not None:
                client.timed_out_message()
            self._enqueue(msg)
        return bool(expired)

    def process_deferred(self, now: float) -> bool:
        due = self.deferred.pop_due(now)
        for msg in due:
            self._enqueue(msg)
        return bool(due)

    # -- administration -------------------------------------------------------
    def pause(self) -> None:
        self.paused = True

    def unpause(self) -> None:
        self.paused = False
        self.pump()

    def empty(self) -> None:
        self.memory.clear()
        self.in_flight.clear()
        self.deferred.clear()
        self.backend.empty()
        if self.deferrals is not None:
            self.deferrals.clear()
        for client in self.clients.values():
            client.empty_in_flight()

    def close_clients(self) -> None:
        for client in list(self.clients.values()):
            client.close()

    def persist(self) -> int:
        """Write everything this channel holds (queued, in flight, deferred) to the backend,
        in that order, deferred ones with their due times, and close it. Returns how many
        messages were written.

        In durable mode what it holds is still on disk, uncommitted; it is written again
        at the end and everything read is committed, so a clean restart brings back each
        message once."""
        self.exiting = True
        pending = list(self.memory)
        self.memory.clear()
        pending += sorted(self.in_flight.clear(), key=lambda m: m.delivered_at)
        deferred = sorted(self.deferred.clear(), key=lambda m: m.deadline)
        if deferred and self.deferrals is not None:
            wall_now, now = time.time(), time.monotonic()
            for msg in deferred:
                self.deferrals.record(msg.id, wall_now + max(0.0, msg.deadline - now))
        pending += deferred
        try:
            if pending:
                self.backend.put_many([m.encode() for m in pending])
            if self._durable is not None:
                self._durable.ack_all_read()
        finally:
            if self.deferrals is not None:
                self.deferrals.close()
            self.backend.close()
        return len(pending)

    def delete(self) -> None:
        self.exiting = True
        self.close_clients()
        self.memory.clear()
        self.in_flight.clear()
        self.deferred.clear()
        self.backend.delete()
        if self.deferrals is not None:
            self.deferrals.delete()

    def __repr__(self) -> str:
        return f"Channel({self.topic_name}:{self.name})"
