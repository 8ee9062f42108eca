"""Protocol V2 frames: ``[size:int32][type:int32][data]`` where size counts type + data."""
from __future__ import annotations

import struct
from dataclasses import dataclass

from .errors import E_BAD_BODY, ProtocolError

FRAME_RESPONSE = 0
FRAME_ERROR = 1
FRAME_MESSAGE = 2
FRAME_TYPES = (FRAME_RESPONSE, FRAME_ERROR, FRAME_MESSAGE)

FRAME_HEADER = struct.Struct(">Ii")
DEFAULT_MAX_FRAME_SIZE = 64 * 1024 * 1024


def encode_frame(frame_type: int, data: bytes) -> bytes:
    return FRAME_HEADER.pack(len(data) + 4, frame_type) + data


@dataclass(frozen=True, slots=True)
class Frame:
    type: int
    data: bytes

    @property
    def is_response(self) -> bool:
        return self.type == FRAME_RESPONSE

    @property
    def is_error(self) -> bool:
        return self.type == FRAME_ERROR

    @property
    def is_message(self) -> bool:
        return self.type == FRAME_MESSAGE

    @property
    def error_code(self) -> str:
        return self.data.split(b" ", 1)[0].decode("ascii", "replace")


class FrameDecoder:
    """Streaming decoder of V2 frames (the client's side of the conversation).

    Feed it any chunks; iterate to take out the complete frames.
    """

    def __init__(self, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE) -> None:
        self._buf = bytearray()
        self._pos = 0
        self.max_frame_size = max_frame_size

    def feed(self, data: bytes) -> None:
        if self._pos and self._pos == len(self._buf):
            self._buf.clear()
            self._pos = 0
        self._buf += data

    def __iter__(self) -> "FrameDecoder":
        return self

    def __next__(self) -> Frame:
        frame = self.next_frame()
        if frame is None:
            raise StopIteration
        return frame

    def next_frame(self) -> Frame | None:
        buf, pos = self._buf, self._pos
        if len(buf) - pos < 8:
            self._compact()
            return None
        size, frame_type = FRAME_HEADER.unpack_from(buf, pos)
        if size < 4 or size > self.max_frame_size:
            raise ProtocolError(E_BAD_BODY, f"invalid frame size {size}")
        if frame_type not in FRAME_TYPES:
            raise ProtocolError(E_BAD_BODY, f"invalid frame type {frame_type}")
        end = pos + 4 + size
        if len(buf) < end:
            self._compact()
            return None
        data = bytes(buf[pos + 8:end])
        self._pos = end
        return Frame(frame_type, data)

    def next_message_payloads(self) -> list[bytes]:
        """The data of the complete message frames at the head of the buffer, up to the
        first frame of another type or the first incomplete one (both stay for
        :meth:`next_frame`). One call for a whole chunk of deliveries, no :class:`Frame`
        per message: for consumers that take many messages at once."""
        buf, pos, available = self._buf, self._pos, len(self._buf)
        payloads: list[bytes] = []
        append, unpack, limit = payloads.append, FRAME_HEADER.unpack_from, self.max_frame_size
        with memoryview(buf) as view:
            while available - pos >= 8:
                size, frame_type = unpack(buf, pos)
                if frame_type != FRAME_MESSAGE:
                    break
                if size < 4 or size > limit:
                    raise ProtocolError(E_BAD_BODY, f"invalid frame size {size}")
                end = pos + 4 + size
                if end > available:
                    break
                append(bytes(view[pos + 8:end]))
                pos = end
        self._pos = pos
        if payloads:
            self._compact()
        return payloads

    def take_unparsed(self) -> bytes:
        """Hand back buffered bytes not yet decoded (e.g. when the stream's encoding changes)."""
        rest = bytes(self._buf[self._pos:])
        self._buf.clear()
        self._pos = 0
        return rest

    def _compact(self) -> None:
        if self._pos > 65536 or self._pos == len(self._buf):
            del self._buf[:self._pos]
            self._pos = 0
