"""A message inside nsqd: the wire fields plus where it is in its channel's life."""
from __future__ import annotations

import time

from nsq_protocol.message import MESSAGE_HEADER, MSG_ID_LENGTH, decode_message, encode_message

MAX_ATTEMPTS = 0xFFFF


class Message:
    __slots__ = ("id", "body", "timestamp", "attempts", "defer", "client_id", "deadline",
                 "delivered_at", "fifo", "disk_token")

    def __init__(self, msg_id: bytes, body: bytes, timestamp: int | None = None,
                 attempts: int = 0) -> None:
        self.id = msg_id
        self.body = body
        self.timestamp = time.time_ns() if timestamp is None else timestamp
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

    def copy(self) -> "Message":
        twin = Message(self.id, self.body, self.timestamp, self.attempts)
        twin.defer = self.defer
        return twin

    def encode(self) -> bytes:
        """NSQ's message layout, as stored in the disk queue."""
        return encode_message(self.id, self.timestamp, self.attempts, self.body)

    @classmethod
    def decode(cls, data: bytes) -> "Message":
        wire = decode_message(data)
        return cls(wire.id, wire.body, wire.timestamp, wire.attempts)

    def __repr__(self) -> str:
        return f"Message({self.id.decode()}, attempts={self.attempts}, {len(self.body)} bytes)"


MESSAGE_OVERHEAD = MESSAGE_HEADER.size + MSG_ID_LENGTH  # 26 bytes before the body
