"""nsqlookupd's protocol V1: what nsqd says to a lookupd over TCP, and what it answers.

A peer opens with the magic ``"  V1"``, then sends lines ``NAME param param\\n``;
IDENTIFY is followed by ``[size:int32][JSON body]``. Every answer is ``[size:int32][data]``
with no frame type; an error is data starting with ``E_`` and lookupd closes the
connection after it. Commands: IDENTIFY, REGISTER topic [channel], UNREGISTER topic
[channel], PING.

Server side: :class:`V1CommandDecoder`, :func:`parse_topic_channel`,
:func:`decode_peer_identity`, :func:`encode_response`.
Client side: :func:`identify`, :func:`register`, :func:`unregister`, :func:`ping`,
:class:`V1ResponseDecoder`.
"""
from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from pydantic import BaseModel, ConfigDict, StrictInt, StrictStr, ValidationError

from .errors import E_BAD_BODY, E_BAD_CHANNEL, E_BAD_PROTOCOL, E_BAD_TOPIC, E_INVALID, ProtocolError
from .gotext import raw
from .names import is_valid_channel_name, is_valid_topic_name

MAGIC_V1 = b"  V1"
OK = b"OK"

IDENTIFY = b"IDENTIFY"
REGISTER = b"REGISTER"
UNREGISTER = b"UNREGISTER"
PING = b"PING"
COMMANDS = frozenset({IDENTIFY, REGISTER, UNREGISTER, PING})

_SIZE = struct.Struct(">i")
_USIZE = struct.Struct(">I")

# Go's lookupd reads lines and bodies without bounds; we refuse what no peer sends
DEFAULT_MAX_LINE_LENGTH = 64 * 1024
DEFAULT_MAX_BODY_SIZE = 1024 * 1024
DEFAULT_MAX_RESPONSE_SIZE = 16 * 1024 * 1024

# Go's strings.TrimSpace set (ASCII part; the V1 protocol is ASCII)
_SPACE = b" \t\n\v\f\r"


# ---------------------------------------------------------------------------
# client side: encoders
# ---------------------------------------------------------------------------
def _line(name: bytes, *params: str) -> bytes:
    return b" ".join([name, *(p.encode() for p in params)]) + b"\n"


def identify(info: dict[str, Any]) -> bytes:
    body = json.dumps(info, separators=(",", ":")).encode()
    return IDENTIFY + b"\n" + _USIZE.pack(len(body)) + body


def register(topic: str, channel: str | None = None) -> bytes:
    return _line(REGISTER, topic) if channel is None else _line(REGISTER, topic, channel)


def unregister(topic: str, channel: str | None = None) -> bytes:
    return _line(UNREGISTER, topic) if channel is None else _line(UNREGISTER, topic, channel)


def ping() -> bytes:
    return PING + b"\n"


def encode_response(data: bytes) -> bytes:
    """One answer as lookupd writes it: ``[size:int32][data]``."""
    return _USIZE.pack(len(data)) + data


def is_error_response(data: bytes) -> bool:
    return data.startswith(b"E_")


class V1ResponseDecoder:
    """Streaming decoder of lookupd's answers (nsqd's side). Feed chunks, iterate answers."""

    def __init__(self, max_size: int = DEFAULT_MAX_RESPONSE_SIZE) -> None:
        self.max_size = max_size
        self._buf = bytearray()

    def feed(self, data: bytes) -> None:
        self._buf += data

    def __iter__(self) -> Iterator[bytes]:
        while (answer := self.next_response()) is not None:
            yield answer

    def next_response(self) -> bytes | None:
        if len(self._buf) < 4:
            return None
        (size,) = _USIZE.unpack_from(self._buf, 0)
        if size > self.max_size:
            raise ProtocolError(E_BAD_BODY, f"response size {size} > {self.max_size}")
        if len(self._buf) < 4 + size:
            return None
        data = bytes(self._buf[4:4 + size])
        del self._buf[:4 + size]
        return data


# ---------------------------------------------------------------------------
# server side: decoding
# ---------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class V1Command:
    """One decoded command: its name, its space-separated params, IDENTIFY's body."""

    name: bytes
    params: tuple[bytes, ...] = ()
    body: bytes | None = None


# Called with IDENTIFY's command before its body is read: lookupd refuses a second
# IDENTIFY with E_INVALID without looking at what follows.
BeforeBodyHook = Callable[[V1Command], None]


class V1CommandDecoder:
    """Turns the byte stream from a lookupd peer into :class:`V1Command` values.

    Expects the magic first (``expect_magic=False`` to skip it). ``feed`` chunks of any
    size, then take commands with ``next_command`` until it returns None. Bad input
    raises :class:`ProtocolError`; the stream cannot be resynchronised after that, so
    the connection is closed (lookupd closes on every error).

    Lines are read as Go's lookupd reads them: surrounding whitespace trimmed, then
    split on single spaces (two spaces make an empty param). Unknown command names are
    refused here with E_INVALID, since whether a body follows depends on the name.
    """

    def __init__(self, *, expect_magic: bool = True, before_body: BeforeBodyHook | None = None,
                 max_line_length: int = DEFAULT_MAX_LINE_LENGTH,
                 max_body_size: int = DEFAULT_MAX_BODY_SIZE) -> None:
        self.before_body = before_body
        self.max_line_length = max_line_length
        self.max_body_size = max_body_size
        self._need_magic = expect_magic
        self.magic: bytes | None = None  # the 4 bytes the peer opened with
        self._buf = bytearray()
        self._scan = 0  # where to resume looking for a newline
        self._pending: V1Command | None = None  # IDENTIFY waiting for its body
        self._body_len = -1

    def feed(self, data: bytes) -> None:
        self._buf += data

    def __iter__(self) -> Iterator[V1Command]:
        while (cmd := self.next_command()) is not None:
            yield cmd

    def next_command(self) -> V1Command | None:
        if self._need_magic:
            if len(self._buf) < len(MAGIC_V1):
                return None
            self.magic = bytes(self._buf[:4])
            if self.magic != MAGIC_V1:
                raise ProtocolError(E_BAD_PROTOCOL)  # lookupd answers the bare code
            del self._buf[:4]
            self._need_magic = False
        if self._pending is not None:
            return self._read_body()
        nl = self._buf.find(b"\n", self._scan)
        if nl < 0 and len(self._buf) > self.max_line_length or nl > self.max_line_length:
            raise ProtocolError(E_INVALID, "command line too long")
        if nl < 0:
            self._scan = len(self._buf)
            return None
        line = bytes(self._buf[:nl]).strip(_SPACE)
        del self._buf[:nl + 1]
        self._scan = 0
        name, *params = line.split(b" ")
        if name not in COMMANDS:
            raise ProtocolError(E_INVALID, f"invalid command {raw(name)}")
        cmd = V1Command(name, tuple(params))
        if name != IDENTIFY:
            return cmd
        if self.before_body is not None:
            self.before_body(cmd)
        self._pending = cmd
        self._body_len = -1
        return self._read_body()

    def _read_body(self) -> V1Command | None:
        cmd = self._pending
        assert cmd is not None
        if self._body_len < 0:
            if len(self._buf) < 4:
                return None
            (size,) = _SIZE.unpack_from(self._buf, 0)
            if size < 0 or size > self.max_body_size:
                raise ProtocolError(E_BAD_BODY, f"IDENTIFY invalid body size {size}")
            del self._buf[:4]
            self._body_len = size
        if len(self._buf) < self._body_len:
            return None
        body = bytes(self._buf[:self._body_len])
        del self._buf[:self._body_len]
        self._pending = None
        return V1Command(cmd.name, cmd.params, body)


def parse_topic_channel(cmd: V1Command) -> tuple[str, str | None]:
    """REGISTER/UNREGISTER's ``topic [channel]``, checked as lookupd checks them."""
    label = cmd.name.decode()
    if not cmd.params:
        raise ProtocolError(E_INVALID, f"{label} insufficient number of params")
    topic = cmd.params[0]
    channel = cmd.params[1] if len(cmd.params) > 1 and cmd.params[1] else None
    if not is_valid_topic_name(topic):
        raise ProtocolError(E_BAD_TOPIC, f"{label} topic name '{raw(topic)}' is not valid")
    if channel is not None and not is_valid_channel_name(channel):
        raise ProtocolError(E_BAD_CHANNEL, f"{label} channel name '{raw(channel)}' is not valid")
    return topic.decode("ascii"), None if channel is None else channel.decode("ascii")


class PeerIdentity(BaseModel):
    """What a peer (nsqd) tells lookupd about itself in IDENTIFY's JSON body."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    broadcast_address: StrictStr = ""
    hostname: StrictStr = ""
    tcp_port: StrictInt = 0
    http_port: StrictInt = 0
    version: StrictStr = ""


def decode_peer_identity(body: bytes) -> PeerIdentity:
    """IDENTIFY's body; E_BAD_BODY when it is not a JSON object of the right types or
    lacks broadcast_address, tcp_port, http_port or version."""
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        raise ProtocolError(E_BAD_BODY, "IDENTIFY failed to decode JSON body") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ProtocolError(E_BAD_BODY, "IDENTIFY failed to decode JSON body")
    try:
        peer = PeerIdentity.model_validate({k: v for k, v in data.items() if v is not None})
    except ValidationError:
        raise ProtocolError(E_BAD_BODY, "IDENTIFY failed to decode JSON body") from None
    if not peer.broadcast_address or not peer.tcp_port or not peer.http_port or not peer.version:
        raise ProtocolError(E_BAD_BODY, "IDENTIFY missing fields")
    return peer
