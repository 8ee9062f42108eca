"""The in-flight and deferred priority queues of a channel.

In flight: a message's deadline is "now + its client's msg_timeout", so messages that
share a timeout arrive in deadline order. One FIFO (a dict, which keeps insertion order)
per distinct timeout is therefore a priority queue with O(1) push, remove by ID and
TOUCH (delete and insert again at the end), where a heap would need O(log n)
Python-level work on every FIN. The rare deadline that breaks the order (a TOUCH capped
by --max-msg-timeout) goes to a small heap instead.

Fresh messages (bare payloads from the memory queue) delivered together to one client
stay together as one ``DeliveryBatch``: they share the owner, deadline and delivery
time, each has its payload's attempts plus one, and the index maps each of their IDs to
the batch, so delivering and finishing them creates no object per message. A message
that needs state of its own (TOUCH, REQ, a single FIN, its timeout) is detached from its
batch into a ``Message`` first.

Deferred: REQ delays and DPUB defers are arbitrary, so a heap; nothing is removed from it
except by popping.
"""
from __future__ import annotations

import heapq
import itertools
import operator
import sys
from collections import Counter
from typing import Collection, Iterable, Sequence

from .message import ID_SLICE, MAX_ATTEMPTS, Message, Payload, payload_attempts


class DeliveryBatch:
    __slots__ = ("client_id", "deadline", "delivered_at", "fifo", "ids", "payloads", "live", "_positions")

    def __init__(self, ids: Sequence[bytes], payloads: Sequence[Payload], client_id: int, delivered_at: float,
                 deadline: float, fifo: float) -> None:
        self.ids = ids
        self.payloads = payloads
        self.client_id = client_id
        self.delivered_at = delivered_at
        self.deadline = deadline
        self.fifo = fifo
        self.live = len(ids)  # how many are still in flight as part of this batch
        self._positions: dict[bytes, int] | None = None

    def message(self, msg_id: bytes) -> Message:
        """The message ``msg_id`` of this batch with its own state, as delivered."""
        if self._positions is None:
            self._positions = dict(zip(self.ids, range(len(self.ids))))
        payload = self.payloads[self._positions[msg_id]]
        msg = Message(payload, min(payload_attempts(payload) + 1, MAX_ATTEMPTS))
        msg.client_id = self.client_id
        msg.delivered_at = self.delivered_at
        msg.deadline = self.deadline
        return msg


InFlight = Message | DeliveryBatch
_EMPTY_DICT_SIZE = sys.getsizeof({0: 0})  # a dict's size with its smallest table
_take_id = operator.itemgetter(ID_SLICE)  # a payload's message ID, sliced without a Python step


class InFlightQueue:
    __slots__ = ("_by_id", "_fifos", "_irregular")

    def __init__(self) -> None:
        self._by_id: dict[bytes, InFlight] = {}
        # per timeout, in deadline order: messages keyed by ID, batches by themselves
        self._fifos: dict[float, dict[object, InFlight]] = {}
        self._irregular: list[tuple[float, bytes]] = []

    def __len__(self) -> int:
        return len(self._by_id)

    def __contains__(self, msg_id: bytes) -> bool:
        return msg_id in self._by_id

    def get(self, msg_id: bytes) -> Message | None:
        """The in-flight message ``msg_id`` (detached from its batch, if it was in one)."""
        entry = self._by_id.get(msg_id)
        if entry is None or entry.__class__ is Message:
            return entry  # type: ignore[return-value]
        return self._detach(entry, msg_id)  # type: ignore[arg-type]

    def _detach(self, batch: DeliveryBatch, msg_id: bytes) -> Message:
        msg = batch.message(msg_id)
        self._leave_batch(batch, 1)
        fifo = self._fifos[batch.fifo]
        if fifo and next(reversed(fifo.values())).deadline > batch.deadline:
            # later deliveries are queued behind the batch: at the FIFO's end this deadline
            # would break its order and wait for theirs, so it goes to the heap
            self._by_id[msg_id] = msg
            msg.fifo = None
            heapq.heappush(self._irregular, (msg.deadline, msg_id))
        else:
            self.push(msg, batch.deadline, batch.fifo)
        return msg

    def _leave_batch(self, batch: DeliveryBatch, count: int) -> None:
        batch.live -= count
        if not batch.live:
            del self._fifos[batch.fifo][batch]

    def messages(self) -> list[Message]:
        """Every message in flight (those of batches as copies with their state)."""
        out: list[Message] = []
        for entry in self._by_id.values():
            if entry.__class__ is Message:
                out.append(entry)  # type: ignore[arg-type]
        for batch in self._batches():
            out += self._live_messages(batch)
        return out

    def _batches(self) -> list[DeliveryBatch]:
        return [e for fifo in self._fifos.values() for e in fifo.values() if e.__class__ is DeliveryBatch]  # type: ignore[misc]

    def _live_messages(self, batch: DeliveryBatch) -> list[Message]:
        by_id = self._by_id
        return [batch.message(i) for i in batch.ids if by_id.get(i) is batch]

    def ids(self) -> Collection[bytes]:
        """The IDs in flight, as a live view."""
        return self._by_id.keys()

    def push(self, msg: Message, deadline: float, timeout: float) -> None:
        """Add a message whose deadline is ``now + timeout``."""
        msg.deadline = deadline
        self._by_id[msg.id] = msg
        fifo = self._fifos.get(timeout)
        if fifo is None:
            fifo = self._fifos[timeout] = {}
        fifo[msg.id] = msg
        msg.fifo = timeout

    def push_many(self, msgs: list[Message], deadline: float, timeout: float) -> None:
        """Add messages delivered together: one deadline, ``now + timeout``."""
        by_id = self._by_id
        fifo = self._fifos.get(timeout)
        if fifo is None:
            fifo = self._fifos[timeout] = {}
        for msg in msgs:
            msg.deadline = deadline
            msg.fifo = timeout
            by_id[msg.id] = fifo[msg.id] = msg

    def push_payloads(self, payloads: list[Payload], client_id: int, now: float, timeout: float) -> None:
        """Add fresh payloads delivered together to ``client_id`` at ``now``, as one batch."""
        ids = list(map(_take_id, payloads))
        batch = DeliveryBatch(ids, payloads, client_id, now, now + timeout, timeout)
        self._by_id.update(zip(ids, itertools.repeat(batch)))
        fifo = self._fifos.get(timeout)
        if fifo is None:
            fifo = self._fifos[timeout] = {}
        fifo[batch] = batch

    def finish_lone(self, msg_id: bytes, owner: int) -> DeliveryBatch | None:
        """FIN of the last fresh message of a batch ``owner`` holds (a consumer with RDY 1
        holds one at a time): the spent batch, removed, for ``push_lone`` to reuse; None,
        with nothing changed, for any other FIN."""
        batch = self._by_id.get(msg_id)
        if batch.__class__ is not DeliveryBatch or batch.client_id != owner or batch.live != 1:  # type: ignore[union-attr]
            return None
        del self._by_id[msg_id]
        del self._fifos[batch.fifo][batch]  # type: ignore[union-attr]
        batch.live = 0  # type: ignore[union-attr]
        return batch  # type: ignore[return-value]

    def push_lone(self, spent: DeliveryBatch, payload: Payload, client_id: int, now: float,
                  timeout: float) -> None:
        """``push_payloads`` of one fresh payload, in a batch ``finish_lone`` returned: the
        next delivery of an RDY 1 consumer costs no allocation of its own."""
        msg_id = payload[ID_SLICE]
        spent.ids = (msg_id,)  # a batch's sequences are never changed in place
        spent.payloads = (payload,)
        spent.client_id = client_id
        spent.delivered_at = now
        spent.deadline = now + timeout
        spent.fifo = timeout
        spent.live = 1
        spent._positions = None
        self._by_id[msg_id] = spent
        fifo = self._fifos.get(timeout)
        if fifo is None:
            fifo = self._fifos[timeout] = {}
        fifo[spent] = spent

    def remove(self, msg_id: bytes) -> Message | None:
        entry = self._by_id.get(msg_id)
        if entry is not None and entry.__class__ is DeliveryBatch:
            self._detach(entry, msg_id)  # type: ignore[arg-type]
        msg = self._by_id.pop(msg_id, None)
        if msg is not None and msg.fifo is not None:
            del self._fifos[msg.fifo][msg_id]
        return msg  # type: ignore[return-value]

    def remove_owned(self, msg_ids: list[bytes], owner: int) -> tuple[int, list[Message], list[tuple[bytes, str]]]:
        """FIN of a batch: remove what ``owner`` holds; returns how many were removed, those
        of them that had state of their own (``Message``), and the IDs refused with the
        reason, in order."""
        by_id = self._by_id
        if len(msg_ids) == 1:  # a consumer with RDY 1 FINs one at a time
            entry = by_id.get(msg_ids[0])
            if entry.__class__ is DeliveryBatch and entry.client_id == owner:  # type: ignore[union-attr]
                del by_id[msg_ids[0]]
                self._leave_batch(entry, 1)  # type: ignore[arg-type]
                return 1, [], []
        holders = Counter(map(by_id.get, msg_ids))
        if (all(h.__class__ is DeliveryBatch and h.client_id == owner for h in holders)
                and len(set(msg_ids)) == len(msg_ids)):
            # the common case: fresh messages this client holds, each named once
            for msg_id in msg_ids:
                del by_id[msg_id]
            for batch, count in holders.items():
                self._leave_batch(batch, count)  # type: ignore[arg-type]
            return len(msg_ids), [], []
        removed: list[Message] = []
        refused: list[tuple[bytes, str]] = []
        for msg_id in msg_ids:
            entry = by_id.get(msg_id)
            if entry is None:
                refused.append((msg_id, "ID not in flight"))
            elif entry.client_id != owner:
                refused.append((msg_id, "client does not own message"))
            else:
                msg = self.remove(msg_id)
                assert msg is not None
                removed.append(msg)
        return len(removed), removed, refused

    def retime(self, msg: Message, deadline: float, timeout: float, in_order: bool) -> None:
        """Give an in-flight message a new deadline (TOUCH). ``in_order``: the deadline is
        ``now + timeout``; otherwise it is earlier (capped) and goes to the heap."""
        if msg.fifo is not None:
            del self._fifos[msg.fifo][msg.id]
        if in_order:
            self.push(msg, deadline, timeout)
            return
        msg.deadline = deadline
        msg.fifo = None
        heapq.heappush(self._irregular, (deadline, msg.id))

    def pop_expired(self, now: float, limit: int = 1 << 30) -> list[Message]:
        expired: list[Message] = []
        by_id = self._by_id
        emptied: list[float] = []
        for timeout, fifo in self._fifos.items():
            if not fifo:
                emptied.append(timeout)
                continue
            due: list[InFlight] = []
            for queued in fifo.values():  # one pass: deadlines only grow along a FIFO
                if queued.deadline > now or len(expired) + len(due) >= limit:
                    break
                due.append(queued)
            for queued in due:
                if queued.__class__ is DeliveryBatch:
                    del fifo[queued]
                    msgs = self._live_messages(queued)  # type: ignore[arg-type]
                    for msg in msgs:
                        del by_id[msg.id]
                    expired += msgs
                else:
                    del fifo[queued.id]  # type: ignore[union-attr]
                    del by_id[queued.id]  # type: ignore[union-attr]
                    expired.append(queued)  # type: ignore[arg-type]
        heap = self._irregular
        while heap and heap[0][0] <= now and len(expired) < limit:
            deadline, msg_id = heapq.heappop(heap)
            msg = self._by_id.get(msg_id)
            if msg is not None and msg.fifo is None and msg.deadline == deadline:
                del self._by_id[msg_id]
                expired.append(msg)  # type: ignore[arg-type]
        if len(heap) > 64 and len(heap) > 2 * len(self._by_id):
            self._irregular = [(d, i) for d, i in heap
                               if (m := self._by_id.get(i)) is not None and m.fifo is None and m.deadline == d]
            heapq.heapify(self._irregular)
        self._release(emptied)
        return expired

    def _release(self, emptied: list[float]) -> None:
        """Let go of what the queue no longer uses (the scan calls it): the FIFOs of
        timeouts nothing in flight has (a client's IDENTIFY may choose any), and the
        index's table once it is empty. A dict never shrinks as keys leave, so one that
        held a peak of messages would keep that size for good; an empty one is replaced."""
        for timeout in emptied:
            del self._fifos[timeout]
        if not self._by_id and sys.getsizeof(self._by_id) > _EMPTY_DICT_SIZE:
            self._by_id = {}

    def clear(self) -> list[Message]:
        msgs = self.messages()
        self._by_id.clear()
        self._fifos.clear()
        self._irregular.clear()
        return msgs


class DeferredQueue:
    __slots__ = ("_heap", "_seq")

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, Message]] = []
        self._seq = itertools.count()

    def __len__(self) -> int:
        return len(self._heap)

    def push(self, msg: Message, due: float) -> None:
        msg.deadline = due
        heapq.heappush(self._heap, (due, next(self._seq), msg))

    def pop_due(self, now: float, limit: int = 1 << 30) -> list[Message]:
        heap = self._heap
        due: list[Message] = []
        while heap and heap[0][0] <= now and len(due) < limit:
            due.append(heapq.heappop(heap)[2])
        return due

    def messages(self) -> list[Message]:
        return [entry[2] for entry in self._heap]

    def clear(self) -> list[Message]:
        msgs = [entry[2] for entry in self._heap]
        self._heap.clear()
        return msgs
