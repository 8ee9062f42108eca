"""A message on the wire: ``[timestamp ns:int64][attempts:uint16][id:16 bytes][body]``."""
from __future__ import annotations

import struct
from dataclasses import dataclass

from .errors import E_BAD_MESSAGE, ProtocolError
from .frames import FRAME_MESSAGE

MSG_ID_LENGTH = 16
MESSAGE_HEADER = struct.Struct(">qH")
MESSAGE_HEADER_SIZE = MESSAGE_HEADER.size + MSG_ID_LENGTH  # 26
# frame size, frame type, timestamp, attempts: one pack for a whole message frame header
MESSAGE_FRAME_HEADER = struct.Struct(">IiqH")


@dataclass(frozen=True, slots=True)
class WireMessage:
    timestamp: int  # nanoseconds since the epoch
    attempts: int
    id: bytes
    body: bytes


def encode_message(msg_id: bytes, timestamp: int, attempts: int, body: bytes) -> bytes:
    """The message payload (as stored in nsqd's disk queue), without a frame header."""
    return MESSAGE_HEADER.pack(timestamp, attempts) + msg_id + body


def encode_message_frame(msg_id: bytes, timestamp: int, attempts: int, body: bytes) -> bytes:
    """A complete message frame, ready for the socket."""
    size = 4 + MESSAGE_HEADER_SIZE + len(body)
    return MESSAGE_FRAME_HEADER.pack(size, FRAME_MESSAGE, timestamp, attempts) + msg_id + body


def decode_message(data: bytes | memoryview) -> WireMessage:
    if len(data) < MESSAGE_HEADER_SIZE:
        raise ProtocolError(E_BAD_MESSAGE, f"message too short ({len(data)} bytes)")
    timestamp, attempts = MESSAGE_HEADER.unpack_from(data, 0)
    return WireMessage(timestamp, attempts, bytes(data[10:26]), bytes(data[26:]))
