"""Messages inside nsqd.

A queued message is just its encoded payload, NSQ's on-disk layout
``[timestamp ns:int64][attempts:uint16][id:16][body]``, as one immutable ``bytes``: a
topic hands the same object to every channel, a full memory queue writes it to disk as
it is, and the garbage collector never has to look at it. Only a message with state of
its own (in flight, deferred, requeued, read from a durable queue) is a ``Message``.
"""
from __future__ import annotations

import struct
import time
from typing import Sequence

from nsq_protocol.message import MESSAGE_HEADER, MESSAGE_HEADER_SIZE, MSG_ID_LENGTH, decode_message

from .guid import SEQUENCE_HEX, IdRun

MAX_ATTEMPTS = 0xFFFF
ATTEMPTS = struct.Struct(">H")
ATTEMPTS_OFFSET = 8  # in the payload, after the timestamp
ID_SLICE = slice(10, 10 + MSG_ID_LENGTH)

Payload = bytes


def encode_payload(msg_id: bytes, body: bytes, timestamp: int, attempts: int = 0) -> Payload:
    return b"".join((MESSAGE_HEADER.pack(timestamp, attempts), msg_id, body))


def encode_payloads(timestamp: int, ids: list[IdRun], bodies: Sequence[bytes]) -> list[Payload]:
    """Fresh payloads for ``bodies`` in order, one timestamp, IDs from consecutive runs."""
    head, join = MESSAGE_HEADER.pack(timestamp, 0), b"".join
    payloads: list[Payload] = []
    done = 0
    for run in ids:
        head_and_prefix = head + run.prefix
        seqs = run.sequences
        # no formatting per message: the ID's last 3 hex digits come from a table
        payloads += [join((head_and_prefix, seq_hex, body)) for seq_hex, body
                     in zip(SEQUENCE_HEX[seqs.start:seqs.stop], bodies[done:done + len(seqs)])]
        done += len(seqs)
    return payloads


def payload_attempts(payload: Payload) -> int:
    return payload[8] << 8 | payload[9]


def check_payload(data: bytes) -> Payload:
    """A payload read back from disk; raises when it cannot be one."""
    if len(data) < MESSAGE_HEADER_SIZE:
        decode_message(data)  # raises the protocol's "message too short" error
    return data


class Message:
    """One channel's copy of a message while it has state: attempts so far, the owning
    client and deadlines while in flight, the durable-queue entry it was read from."""

    __slots__ = ("payload", "id", "attempts", "defer", "client_id", "deadline",
                 "delivered_at", "fifo", "disk_token")

    def __init__(self, payload: Payload, attempts: int) -> None:
        self.payload = payload
        self.id = payload[ID_SLICE]
        self.attempts = attempts
        self.defer = 0.0  # DPUB: seconds to wait before the message reaches consumers
        # while in flight: the owning client, its deadline, when it was delivered and
        # which deadline-ordered FIFO of the in-flight queue holds it
        self.client_id = 0
        self.deadline = 0.0
        self.delivered_at = 0.0
        self.fifo: float | None = None
        # durable mode: the entry this message was read from, acknowledged once it is done
        self.disk_token: int | None = None

    @classmethod
    def create(cls, msg_id: bytes, body: bytes, timestamp: int | None = None, attempts: int = 0) -> "Message":
        ts = time.time_ns() if timestamp is None else timestamp
        return cls(encode_payload(msg_id, body, ts, attempts), attempts)

    @classmethod
    def from_payload(cls, payload: Payload) -> "Message":
        return cls(payload, payload_attempts(payload))

    def copy(self) -> "Message":
        twin = Message(self.payload, self.attempts)
        twin.defer = self.defer
        return twin

    @property
    def body(self) -> bytes:
        return self.payload[MESSAGE_HEADER_SIZE:]

    @property
    def timestamp(self) -> int:
        return int(MESSAGE_HEADER.unpack_from(self.payload, 0)[0])

    def encode(self) -> Payload:
        """NSQ's message layout with the current attempts, as stored in the disk queue."""
        payload = self.payload
        if payload_attempts(payload) == self.attempts:
            return payload
        return b"".join((payload[:ATTEMPTS_OFFSET], ATTEMPTS.pack(self.attempts), payload[ATTEMPTS_OFFSET + 2:]))

    def __repr__(self) -> str:
        return f"Message({self.id.decode()}, attempts={self.attempts}, {len(self.payload) - MESSAGE_HEADER_SIZE} bytes)"


def item_payload(item: "Payload | Message") -> Payload:
    """A queue item as it is written to disk."""
    return item.encode() if item.__class__ is Message else item  # type: ignore[union-attr,return-value]


MESSAGE_OVERHEAD = MESSAGE_HEADER.size + MSG_ID_LENGTH  # 26 bytes before the body
