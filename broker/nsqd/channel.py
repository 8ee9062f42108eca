"""A channel: one copy of a topic's stream, shared by its consumers.

Messages wait in a memory queue (up to --mem-queue-size), then in the backend; a
delivered message sits in the in-flight queue until FIN, REQ or its timeout; REQ with a
delay and DPUB park messages in the deferred queue. Delivery is pushed: whenever a
message or a consumer's capacity appears, ``pump`` hands messages to ready consumers in
turn.

The memory queue (``PayloadQueue``) holds fresh messages as their bare payloads, or the
runs an MPUB or pipelined PUBs made of them, shared with the topic's other channels, and
only messages with state of their own (requeued, timed out, read from a durable queue)
as ``Message``. Bare payloads stay bare when delivered: the ones a
client gets together are framed in one pass and go in flight as one batch (pqueue's
``DeliveryBatch``), and a run read from the disk queue is delivered the same way; a
message becomes a ``Message`` only when it needs state of its own (TOUCH, REQ, timeout).

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
import sys
import time
from collections import deque
from typing import TYPE_CHECKING, Callable, Iterable

from nsq_protocol.names import is_ephemeral

from .backend import Backend, DiscardingBackend
from .client_conn import ClientState
from .deferrals import DeferralStore
from .durable_queue import DurableDiskQueue
from .e2e_latency import LatencyWindow
from .message import ID_SLICE, MAX_ATTEMPTS, Message, Payload, check_payload, item_payload, payload_attempts
from .payload_queue import PayloadQueue
from .payload_run import Payloads
from .pqueue import DeferredQueue, InFlightQueue

_SUBSCRIBED = ClientState.SUBSCRIBED  # an enum member read through its class costs ~0.1 us

if TYPE_CHECKING:
    from .client_conn import ClientConn

log = logging.getLogger("nsqd")

STALE_IN_TURN = 16  # entries of consumers that left tolerated in a channel's turn
EMPTY_DICT_SIZE = sys.getsizeof({0: 0})  # a dict's size with its smallest table


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

        self.memory = PayloadQueue()
        self.in_flight = InFlightQueue()
        self.deferred = DeferredQueue()
        self.clients: dict[int, ClientConn] = {}
        self._with_room: deque[ClientConn] = deque()  # consumers that may have RDY room, in turn
        self._with_room_ids: set[int] = set()
        self._discarding = isinstance(backend, DiscardingBackend)
        self._pump_scheduled = False
        self._from_backend = False  # alternate memory/backend reads when both hold messages

        self.paused = False
        self.exiting = False
        self.message_count = 0
        self.requeue_count = 0
        self.timeout_count = 0
        self.e2e_latency: LatencyWindow | None = None  # publish-to-FIN times, when tracked
        # replicated topics: told (topic, channel, IDs) of every FIN, for the backups
        self.on_finished: Callable[[str, str, list[bytes]], None] | None = None
        # and of every REQ with a delay: (topic, channel, ID, due as a wall-clock time)
        self.on_requeued: Callable[[str, str, bytes, float], None] | None = None

    # -- queue ----------------------------------------------------------------
    @property
    def depth(self) -> int:
        return self.memory.length + self.backend.depth

    def put(self, item: Payload | Message) -> None:
        self.message_count += 1
        self._enqueue(item)
        self._schedule_pump()

    def put_payloads(self, payloads: Payloads) -> None:
        """Fresh messages, in order (an MPUB's, or a run the topic read from its disk):
        what the memory queue has no room for goes to disk in one write."""
        self.message_count += len(payloads)
        room = self.mem_queue_size - self.memory.length
        if self._durable is None and room >= len(payloads):
            self.memory.extend(payloads)
        elif self._durable is None and not self._discarding:
            if room > 0:
                self.memory.extend(payloads[:room])
            self.backend.put_many(list(payloads[max(0, room):]))
        else:
            for payload in payloads:
                self._enqueue(payload)
        self._schedule_pump()

    def fits_in_memory(self, count: int) -> bool:
        return self._durable is None and self.memory.length + count <= self.mem_queue_size

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

    def _enqueue(self, item: Payload | Message) -> None:
        if self.memory.length < self.mem_queue_size:
            self.memory.append(item)
        elif item.__class__ is Message and item.disk_token is not None:  # type: ignore[union-attr]
            self.memory.append(item)  # read from a durable queue: still on disk, stays in memory
        elif self._discarding and self._with_room and not self.paused:
            self.memory.append(item)  # a waiting consumer may take it; the pump drops the rest
            self._schedule_pump()
        else:
            self.backend.put(item_payload(item))

    def _drop_overflow(self) -> None:
        """What an ephemeral channel holds beyond its memory queue once the consumers
        with room have taken their share: the newest messages go, as nsqd drops them."""
        excess = self.memory.length - self.mem_queue_size
        for _ in range(excess):
            item = self.memory.pop()
            self.backend.put(item_payload(item))  # the discarding backend counts it

    def _next_message(self) -> Message | None:
        backend = self.backend
        if self.memory.length and not (self._from_backend and backend.depth):
            self._from_backend = True
            item = self.memory.popleft()
        elif backend.depth:
            self._from_backend = False
            return self._read_backend()
        elif self.memory.length:
            item = self.memory.popleft()
        else:
            return None
        if item.__class__ is Message:
            return item  # type: ignore[return-value]
        return Message(item, payload_attempts(item))  # type: ignore[arg-type]

    def _read_backend_run(self, limit: int) -> list[Payload | Message] | None:
        """Up to ``limit`` messages read from disk to deliver now (deferred ones go to the
        deferred queue instead); None when the backend gave nothing. A plain disk queue
        gives a run of payloads at once, delivered as bare payloads; a durable one gives
        one ``Message`` at a time, each holding its entry's token."""
        if self._durable is not None:
            before = self.backend.depth
            msg = self._read_backend()
            if msg is None:
                return [] if self.backend.depth < before else None
            return [msg]
        payloads = self.backend.get_many(limit)  # type: ignore[attr-defined]
        if not payloads:
            return None
        deferrals = self.deferrals
        if deferrals is None or not len(deferrals):
            return payloads
        due: list[Payload | Message] = []
        for payload in payloads:
            left = deferrals.remaining(payload[ID_SLICE])
            if left > 0:
                self.deferred.push(Message.from_payload(payload), time.monotonic() + left)
            else:
                due.append(payload)
        return due

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
            msg = Message.from_payload(check_payload(data))
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
            if client.spare_ready() > 0:
                self.client_has_room(client)

    def remove_client(self, client_id: int) -> None:
        client = self.clients.pop(client_id, None)
        if client is None:
            return
        in_turn = self._with_room_ids
        in_turn.discard(client_id)  # its entry in the turn is skipped when the pump reaches it
        turn = self._with_room
        # The pump reaches the turn only while messages wait: on an empty channel the
        # entries of consumers that left would pile up (and keep each connection's
        # objects) as consumers come and go. Every entry is either in ``in_turn`` or
        # left: once the ones that left outnumber the rest, the turn keeps only the
        # others, in order (in place: a running pump holds the deque).
        if not self.clients:
            turn.clear()
            if sys.getsizeof(self.clients) > EMPTY_DICT_SIZE:  # tables sized for a peak of consumers
                self.clients, self._with_room_ids = {}, set()
        elif len(turn) - len(in_turn) > max(STALE_IN_TURN, len(in_turn)):
            live = [c for c in turn if c.id in in_turn]
            turn.clear()
            turn.extend(live)
        if not self.clients and self.ephemeral and self._on_ephemeral_empty is not None:
            self._on_ephemeral_empty(self)

    def client_has_room(self, client: "ClientConn") -> None:
        """``client`` may take messages now: it joins the end of the turn (once)."""
        if client.id not in self._with_room_ids and client.id in self.clients:
            self._with_room_ids.add(client.id)
            self._with_room.append(client)

    def pump(self) -> None:
        """Hand queued messages to the consumers with room, in turn: each takes its share
        of what is queued (a lone consumer all it has room for) and goes to the back of
        the turn while it has room left. Each consumer's messages leave in one write when
        the pump is done (or whenever its output buffer fills)."""
        try:
            if not (self.paused or self.exiting):
                self._pump()
        finally:
            if self._discarding and self.memory.length > self.mem_queue_size:
                self._drop_overflow()

    def _pump(self) -> None:
        turn, in_turn, clients = self._with_room, self._with_room_ids, self.clients
        if not turn:
            return
        memory, backend = self.memory, self.backend
        lone = len(clients) == 1
        now = time.monotonic()
        held: dict[int, ClientConn] = {}
        try:
            while turn and (memory.length or backend.depth):
                client = turn.popleft()
                client_id = client.id
                if clients.get(client_id) is not client:
                    continue  # left the channel
                in_turn.discard(client_id)
                spare = client.spare_ready()
                if spare <= 0:
                    continue  # rejoins when something gives it room
                if client_id not in held:
                    held[client_id] = client
                    client.hold_flush()
                count = spare if lone else min(spare, max(1, memory.length // (len(turn) + 1)))
                self._deliver(client, count, now)
                if client.spare_ready() > 0 and client_id not in in_turn:
                    in_turn.add(client_id)
                    turn.append(client)
        finally:
            for client in held.values():
                client.release_flush()

    def _deliver(self, client: "ClientConn", count: int, now: float) -> None:
        """Up to ``count`` queued messages to ``client``, in one batch; a sampling client
        is handed one, delivered or dropped by its rate. Fresh messages (bare payloads)
        go in flight as one batch, without an object each (unless the channel times each
        FIN for its end-to-end latency, which needs every message's own record)."""
        memory, backend = self.memory, self.backend
        client_id, timeout = client.id, client.msg_timeout
        if count == 1 and memory.length and not (backend.depth or client.sample_rate) and self.e2e_latency is None:
            self._deliver_one(client, memory.popleft(), now)  # RDY 1: no batch to build
            return
        items: list[Payload | Message] = []
        if client.sample_rate:
            msg = self._next_message()
            if msg is None:
                return
            if random.randrange(100) > client.sample_rate:
                self._settle_unsent(msg)  # sampled out: gone from the channel, as in nsqd
                return
            items.append(msg)
            count = 0
        while count > 0 and (memory.length or backend.depth):
            if backend.depth and (self._from_backend or not memory.length):  # disk and memory take turns
                self._from_backend = False
                run = self._read_backend_run(count)
                if run is None:
                    break  # nothing readable after all
                items += run
                count -= len(run)
                continue
            taken = memory.popleft_many(count)
            count -= len(taken)
            items += taken
            self._from_backend = True
        if not items:
            return
        kinds = set(map(type, items))
        fresh = items if Message not in kinds else [item for item in items if item.__class__ is not Message]
        if fresh and self.e2e_latency is not None:
            items = [item if item.__class__ is Message else Message(item, payload_attempts(item))  # type: ignore[arg-type]
                     for item in items]
            fresh = []
        if fresh is not items:
            msgs: list[Message] = [item for item in items if item.__class__ is Message]  # type: ignore[misc]
            for msg in msgs:
                if msg.attempts < MAX_ATTEMPTS:
                    msg.attempts += 1
                msg.client_id = client_id
                msg.delivered_at = now
            self.in_flight.push_many(msgs, now + timeout, timeout)
        if fresh:
            self.in_flight.push_payloads(fresh, client_id, now, timeout)  # type: ignore[arg-type]
        client.send_messages(items)

    def _deliver_one(self, client: "ClientConn", item: "Payload | Message", now: float) -> None:
        """``_deliver`` of one message from memory, without the lists and type sets a batch needs."""
        self._from_backend = True  # memory took its turn, as in _deliver
        timeout = client.msg_timeout
        if item.__class__ is Message:
            msg: Message = item  # type: ignore[assignment]
            if msg.attempts < MAX_ATTEMPTS:
                msg.attempts += 1
            msg.client_id = client.id
            msg.delivered_at = now
            self.in_flight.push(msg, now + timeout, timeout)
        else:
            self.in_flight.push_payloads([item], client.id, now, timeout)  # type: ignore[list-item]
        client.send_messages([item])

    def _settle_unsent(self, msg: Message) -> None:
        """A message leaves the channel without being delivered: nothing may keep it."""
        if self._durable is not None and msg.disk_token is not None:
            self._durable.ack(msg.disk_token)
        if self.deferrals is not None and len(self.deferrals):
            self.deferrals.forget(msg.id)

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
        self._finished((msg,))
        if self.on_finished is not None:
            self.on_finished(self.topic_name, self.name, [msg_id])
        return msg

    def finish_lone(self, client: "ClientConn", msg_id: bytes) -> bool:
        """FIN of the one fresh message a consumer holds (RDY 1), then its next message at
        once when the pump would hand it that message anyway: nobody else waits in the
        turn, it has room for one, and the memory queue's head is a fresh payload. The
        next delivery reuses the finished one's in-flight entry. False, with nothing
        done, for any other FIN (the command loop's general path takes it), and for every
        FIN on a replicated topic, whose backups the general path tells."""
        if self.on_finished is not None:
            return False
        in_flight = self.in_flight
        spent = in_flight.finish_lone(msg_id, client.id)
        if spent is None:
            return False
        # once per delivery: ClientConn.finished_lone and has_lone_room, and the queue's
        # popleft_fresh_one, read and written here without the calls
        client.finish_count += 1
        in_flight_count = client.in_flight_count - 1
        if in_flight_count < 0:
            in_flight_count = 0
        client.in_flight_count = in_flight_count
        memory = self.memory
        if (memory.length and not self._with_room and client.ready_count - in_flight_count == 1
                and client.state == _SUBSCRIBED and not client.write_paused and not client.sample_rate
                and not (self.paused or self.exiting or self.backend.depth) and self.e2e_latency is None):
            payload = memory.popleft_fresh_one()
            if payload is not None:
                self._from_backend = True  # memory took its turn, as in _deliver
                in_flight.push_lone(spent, payload, client.id, time.monotonic(), client.msg_timeout)
                client.send_lone(payload)
                return True
            client.room_may_have_grown()
            self.pump()
        else:
            client.room_may_have_grown()
            self.pump()
        return True

    def finish_many(self, client_id: int, msg_ids: list[bytes]) -> tuple[int, list[tuple[bytes, str]]]:
        """FIN of a batch: how many were finished, and the IDs refused with the reason."""
        count, with_state, refused = self.in_flight.remove_owned(msg_ids, client_id)
        if with_state:
            self._finished(with_state)
        if self.on_finished is not None and count:
            refused_ids = {msg_id for msg_id, _ in refused}
            self.on_finished(self.topic_name, self.name, [m for m in msg_ids if m not in refused_ids])
        return count, refused

    def _finished(self, msgs: "Iterable[Message]") -> None:
        durable, deferrals, latency = self._durable, self.deferrals, self.e2e_latency
        if durable is not None:
            for msg in msgs:
                if msg.disk_token is not None:
                    durable.ack(msg.disk_token)
        if deferrals is not None and len(deferrals):  # only DPUB and REQ with a delay record any
            for msg in msgs:
                deferrals.forget(msg.id)
        if latency is not None:
            now = time.time()
            for msg in msgs:
                latency.add(now - msg.timestamp / 1e9)

    def requeue(self, client_id: int, msg_id: bytes, delay: float) -> None:
        msg = self._owned(client_id, msg_id)
        self.in_flight.remove(msg_id)
        self.requeue_count += 1
        if delay > 0:
            self.deferred.push(msg, time.monotonic() + delay)
            if self._durable is not None and self.deferrals is not None:
                self.deferrals.record(msg_id, time.time() + delay)
            if self.on_requeued is not None:
                self.on_requeued(self.topic_name, self.name, msg_id, time.time() + delay)
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
        pending: list[Payload | Message] = list(self.memory)
        self.memory.clear()
        in_flight = sorted(self.in_flight.clear(), key=lambda m: m.delivered_at)
        pending += in_flight
        deferred = sorted(self.deferred.clear(), key=lambda m: m.deadline)
        if deferred and self.deferrals is not None:
            wall_now, now = time.time(), time.monotonic()
            for msg in deferred:
                self.deferrals.record(msg.id, wall_now + max(0.0, msg.deadline - now))
        pending += deferred
        try:
            if pending:
                self.backend.put_many([item_payload(m) for m in pending])
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
