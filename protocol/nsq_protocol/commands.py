"""Protocol V2 commands: encoders (the client's side) and a streaming decoder (nsqd's side).

A command is a line ``NAME param param\\n``; PUB, MPUB, DPUB, IDENTIFY and AUTH follow it
with ``[size:int32][body]``. The decoder checks what nsqd checks, in the order nsqd checks
it, before it buffers a body, so an oversized body is refused without being read.
"""
from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from typing import Callable, Container, Iterable, Iterator, Sequence

from .errors import (
    E_BAD_BODY,
    E_BAD_CHANNEL,
    E_BAD_MESSAGE,
    E_BAD_TOPIC,
    E_INVALID,
    ProtocolError,
)
from .gotext import quoted, raw
from .message import MSG_ID_LENGTH
from .names import MAX_NAME_LENGTH, is_valid_channel_name, is_valid_topic_name

_SIZE = struct.Struct(">i")
_USIZE = struct.Struct(">I")

BODY_COMMANDS = frozenset({b"PUB", b"MPUB", b"DPUB", b"IDENTIFY", b"AUTH"})
DEFAULT_MAX_LINE_LENGTH = 16 * 1024  # nsqd reads commands through a 16 KiB buffer


# ---------------------------------------------------------------------------
# encoders
# ---------------------------------------------------------------------------
def _line(name: bytes, *params: bytes | str | int) -> bytes:
    parts = [name]
    for p in params:
        parts.append(p if isinstance(p, bytes) else str(p).encode())
    return b" ".join(parts) + b"\n"


def _with_body(line: bytes, body: bytes) -> bytes:
    return line + _USIZE.pack(len(body)) + body


def identify(data: dict) -> bytes:
    return _with_body(b"IDENTIFY\n", json.dumps(data).encode())


def auth(secret: bytes | str) -> bytes:
    return _with_body(b"AUTH\n", secret.encode() if isinstance(secret, str) else secret)


def sub(topic: str, channel: str) -> bytes:
    return _line(b"SUB", topic, channel)


def rdy(count: int) -> bytes:
    return _line(b"RDY", count)


def fin(msg_id: bytes) -> bytes:
    return b"FIN " + msg_id + b"\n"


def fins(msg_ids: Sequence[bytes]) -> bytes:
    """``FIN`` of each ID, in one ``bytes`` built by a single join (no call per ID)."""
    return b"FIN " + b"\nFIN ".join(msg_ids) + b"\n" if msg_ids else b""


def req(msg_id: bytes, delay_ms: int) -> bytes:
    return _line(b"REQ", msg_id, delay_ms)


def touch(msg_id: bytes) -> bytes:
    return b"TOUCH " + msg_id + b"\n"


def cls() -> bytes:
    return b"CLS\n"


def nop() -> bytes:
    return b"NOP\n"


def pub(topic: str, body: bytes) -> bytes:
    return _with_body(_line(b"PUB", topic), body)


def encode_mpub_body(bodies: Sequence[bytes]) -> bytes:
    parts = [_USIZE.pack(len(bodies))]
    for b in bodies:
        parts.append(_USIZE.pack(len(b)))
        parts.append(b)
    return b"".join(parts)


def mpub(topic: str, bodies: Sequence[bytes]) -> bytes:
    return _with_body(_line(b"MPUB", topic), encode_mpub_body(bodies))


def dpub(topic: str, delay_ms: int, body: bytes) -> bytes:
    return _with_body(_line(b"DPUB", topic, delay_ms), body)


# ---------------------------------------------------------------------------
# parameter parsing shared by nsqd's handlers
# ---------------------------------------------------------------------------
def parse_base10(value: bytes) -> int:
    """nsqd's unsigned decimal parse: digits only; the empty string reads as 0."""
    if value and not value.isdigit():
        raise ValueError(f"not a decimal number: {value!r}")
    return int(value) if value else 0


def parse_message_id(value: bytes) -> bytes:
    if len(value) != MSG_ID_LENGTH:
        raise ProtocolError(E_INVALID, "invalid message ID")
    return bytes(value)


def parse_mpub_body(body: bytes | memoryview, max_msg_size: int,
                    max_body_size: int | None = None) -> "list[bytes] | SameSizeBodies":
    """``[count:int32]([size:int32][bytes])*`` into message bodies, with nsqd's checks.

    With ``max_body_size``, a count that could not fit in a body that big (each message
    takes at least 5 bytes after the 4-byte count) is ``E_BAD_BODY``, as in nsqd. A batch
    whose messages all have one size comes back as :class:`SameSizeBodies` (a sequence
    equal to the list), which leaves the bodies in the MPUB's body until one is asked for.
    """
    if type(body) is not bytes:  # slices of an immutable bytes are the only copies made
        body = bytes(body)
    if len(body) < 4:
        raise ProtocolError(E_BAD_BODY, "MPUB failed to read message count")
    (count,) = _SIZE.unpack_from(body, 0)
    max_count = (max_body_size - 4) // 5 if max_body_size is not None else count
    if count <= 0 or count > max_count:
        raise ProtocolError(E_BAD_BODY, f"MPUB invalid message count {count}")
    same = _same_size_bodies(body, count, max_msg_size)
    if same is not None:
        return same
    return _each_body(body, count, max_msg_size)


class SameSizeBodies(Sequence[bytes]):
    """The bodies of an MPUB whose messages all have one size, left where they are in the
    MPUB's body (``data``, its 4-byte count first): message ``i``'s body starts at
    ``8 + i * (size + 4)``. Sliced out only when asked for (indexing, iterating); nsqd's
    publish encodes the payloads straight from ``data`` (``nsqd.payload_run``). Equal to
    a list or tuple of the same bodies."""

    __slots__ = ("data", "count", "size")

    def __init__(self, data: bytes, count: int, size: int) -> None:
        self.data = data
        self.count = count
        self.size = size

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, index):  # type: ignore[no-untyped-def,override]
        if isinstance(index, slice):
            return list(self.bodies()[index])
        if index < 0:
            index += self.count
        if not 0 <= index < self.count:
            raise IndexError("MPUB body index out of range")
        start = 8 + index * (self.size + 4)
        return self.data[start:start + self.size]

    def __iter__(self) -> Iterator[bytes]:
        return iter(self.bodies())

    def bodies(self) -> Sequence[bytes]:
        """Every body, sliced with no Python step per message: by one ``struct`` unpack
        (its format cached per count and size), or for a very long batch by ``map``."""
        count, size = self.count, self.size
        if count <= _MAX_UNPACKED:
            unpacker = _UNPACKERS.get((count, size))
            if unpacker is None:
                if len(_UNPACKERS) >= _MAX_UNPACKERS:
                    _UNPACKERS.clear()
                unpacker = _UNPACKERS[count, size] = struct.Struct(f">4x{f'4x{size}s' * count}")
            return unpacker.unpack_from(self.data)
        data, stride, end = self.data, size + 4, len(self.data)
        return list(map(data.__getitem__, map(slice, range(8, end, stride), range(8 + size, end + 1, stride))))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (SameSizeBodies, list, tuple)):
            return list(self.bodies()) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # mutable-looking, like a list

    def __repr__(self) -> str:
        return f"SameSizeBodies({self.count} x {self.size} bytes)"


# an unpacker's format is one "4x<size>s" per message: compiled once per (count, size)
_UNPACKERS: dict[tuple[int, int], struct.Struct] = {}
_MAX_UNPACKERS = 64
_MAX_UNPACKED = 4096


def _same_size_bodies(body: bytes, count: int, max_msg_size: int) -> SameSizeBodies | None:
    """The bodies of an MPUB whose messages all have one size (fixed-size records, a
    benchmark's batches), checked with no Python step per message; None when they do not,
    or when anything is wrong (``_each_body`` then reads them, and finds the error).

    The messages are ``stride`` bytes apart, so each byte of their size fields is a column
    of the body: a strided slice, which must repeat the first message's byte."""
    end = len(body)
    if count < 2 or end < 8:
        return None
    (size,) = _SIZE.unpack_from(body, 4)
    stride = size + 4
    if not 0 < size <= max_msg_size or end != 4 + count * stride:
        return None
    for column in range(4, 8):
        if body[column:end:stride].count(body[column]) != count:
            return None
    return SameSizeBodies(body, count, size)


def _each_body(body: bytes, count: int, max_msg_size: int) -> list[bytes]:
    pos, end = 4, len(body)
    bodies: list[bytes] = []
    append, unpack_size = bodies.append, _SIZE.unpack_from
    for i in range(count):
        if end - pos < 4:
            raise ProtocolError(E_BAD_MESSAGE, f"MPUB failed to read message({i}) body size")
        (size,) = unpack_size(body, pos)
        pos += 4
        if not 0 < size <= max_msg_size or end - pos < size:
            _refuse_mpub_message(i, size, max_msg_size)
        append(body[pos:pos + size])
        pos += size
    if pos != end:
        raise ProtocolError(E_BAD_BODY, f"MPUB body has {end - pos} bytes after its {count} messages")
    return bodies


def _refuse_mpub_message(index: int, size: int, max_msg_size: int) -> None:
    if size <= 0:
        raise ProtocolError(E_BAD_MESSAGE, f"MPUB invalid message({index}) body size {size}")
    if size > max_msg_size:
        raise ProtocolError(E_BAD_MESSAGE, f"MPUB message too big {size} > {max_msg_size}")
    raise ProtocolError(E_BAD_MESSAGE, "MPUB failed to read message body")


# ---------------------------------------------------------------------------
# decoder
# ---------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class CommandLimits:
    max_msg_size: int = 1024 * 1024
    max_body_size: int = 5 * 1024 * 1024
    max_req_timeout_ms: int = 60 * 60 * 1000
    max_line_length: int = DEFAULT_MAX_LINE_LENGTH


@dataclass(slots=True)
class Command:
    """One decoded command. ``body`` is set for body commands; ``bodies`` for MPUB;
    ``defer_ms`` for DPUB."""

    name: bytes
    params: tuple[bytes, ...]
    body: bytes | None = None
    bodies: Sequence[bytes] = ()  # a shared empty default: no list built for every FIN
    defer_ms: int = 0

    @property
    def topic(self) -> str:
        return self.params[0].decode("ascii")


# called with the command name before anything of a body command is validated or read;
# nsqd uses it to refuse IDENTIFY/AUTH in the wrong state before looking at the body
BeforeBodyHook = Callable[[bytes], None]


class CommandDecoder:
    """Turns a byte stream from a client into :class:`Command` values.

    ``feed`` any chunk (one byte at a time works); call ``next_command`` until it returns
    None. Any bad input raises :class:`ProtocolError`; after that the stream cannot be
    resynchronised, which is why nsqd closes the connection on those errors.

    A chunk that arrives when everything before it is decoded is decoded in place (an
    immutable ``bytes``, sliced without copying it first); only a partial command left at
    the end of a chunk is carried over in a ``bytearray``.
    """

    __slots__ = ("limits", "before_body", "_buf", "_pos", "_scan", "_pending", "_body_len", "_valid_topics")

    def __init__(self, limits: CommandLimits | None = None,
                 before_body: BeforeBodyHook | None = None) -> None:
        self.limits = limits or CommandLimits()
        self.before_body = before_body
        self._buf: bytes | bytearray = b""
        self._pos = 0
        self._scan = 0  # where to resume looking for a newline
        self._pending: Command | None = None  # a body command waiting for its body
        self._body_len = -1
        self._valid_topics: set[bytes] = set()  # names already checked on this stream

    def feed(self, data: bytes) -> None:
        buf, pos = self._buf, self._pos
        left = len(buf) - pos
        if left <= 0:
            self._buf = data if type(data) is bytes else bytes(data)
            self._pos = self._scan = 0
            return
        if type(buf) is bytes:
            rest = memoryview(buf)[pos:]
            if left + len(data) <= _JOIN_LIMIT:  # a partial command and the next chunk
                self._buf = b"".join((rest, data))
            else:  # a long body on its way: accumulate it without copying it over and over
                self._buf = bytearray(rest)
                self._buf += data
            rest.release()
            self._scan -= pos
            self._pos = 0
            return
        buf += data  # type: ignore[operator]  # a bytearray here

    def take_unparsed(self) -> bytes:
        """Hand back bytes not yet decoded (the connection's encoding is about to change)."""
        rest = self._slice(self._pos, len(self._buf))
        self._buf = b""
        self._pos = self._scan = 0
        return rest

    @property
    def buffered(self) -> int:
        return len(self._buf) - self._pos

    def at_boundary(self) -> bool:
        """Everything fed so far is decoded: the next byte starts a command."""
        return self._pending is None and len(self._buf) <= self._pos

    def knows_topic(self, name: bytes) -> bool:
        """``name`` was checked as a PUB or MPUB topic on this stream before."""
        return name in self._valid_topics

    def __iter__(self) -> Iterable[Command]:
        while (cmd := self.next_command()) is not None:
            yield cmd

    def _slice(self, start: int, end: int) -> bytes:
        buf = self._buf
        if type(buf) is bytes:
            return buf[start:end]
        return bytes(memoryview(buf)[start:end])

    def take_fins(self, in_flight: Container[bytes]) -> list[bytes]:
        """The fast path of a consumer's stream: the IDs of the ``FIN <id>\\n`` lines at
        the front of the stream whose IDs are in ``in_flight``, consumed as a batch.

        It stops at anything else, a FIN of an unknown ID included, and leaves that to
        ``next_command`` (which decodes it and its errors as usual). An ID that is in
        flight proves its line well formed: IDs never contain a space or a newline."""
        buf, pos = self._buf, self._pos
        if (self._pending is not None or len(buf) - pos < FIN_LINE_LENGTH
                or buf[pos + FIN_LINE_LENGTH - 1] != 0x0A or not buf.startswith(b"FIN ", pos)):
            return []
        if len(buf) - pos == FIN_LINE_LENGTH:  # one FIN, as a consumer with RDY 1 sends it
            msg_id = buf[pos + 4:pos + 4 + MSG_ID_LENGTH]
            if type(msg_id) is not bytes:
                msg_id = bytes(msg_id)
            if msg_id not in in_flight:
                return []
            self._pos = self._scan = pos + FIN_LINE_LENGTH
            return [msg_id]
        lines = min((len(buf) - pos) // FIN_LINE_LENGTH, _MAX_FIN_RUN)
        stop = pos + lines * FIN_LINE_LENGTH
        # every line has the same length: a column of the run is a strided slice, and
        # the run of FIN-shaped lines is as long as its shortest column of the right byte
        for offset, byte in _FIN_SHAPE:
            column = buf[pos + offset:stop:FIN_LINE_LENGTH]
            lines = min(lines, len(column) - len(column.lstrip(byte)))
        first = pos + 4
        stop = pos + lines * FIN_LINE_LENGTH
        # the ID of each line, sliced without a Python step per line
        slices = map(slice, range(first, stop, FIN_LINE_LENGTH),
                     range(first + MSG_ID_LENGTH, stop + MSG_ID_LENGTH, FIN_LINE_LENGTH))
        if type(buf) is bytes:
            ids = list(map(buf.__getitem__, slices))
        else:
            ids = list(map(bytes, map(buf.__getitem__, slices)))
        known = list(map(in_flight.__contains__, ids))
        if not all(known):
            del ids[known.index(False):]
        self._pos = self._scan = pos + len(ids) * FIN_LINE_LENGTH
        return ids

    def take_pubs(self) -> tuple[bytes, list[bytes]] | None:
        """The fast path of a producer's stream: a run of complete ``PUB <topic>\\n`` commands
        at the front of the stream, all to one topic already checked on this stream, with
        bodies of an acceptable size; consumed as a batch, as (topic, bodies).

        It stops at anything else (another command, another topic, a size the general
        path refuses, a command not fully received) and leaves that to ``next_command``.
        The caller runs the before-body checks of PUB once for the whole run."""
        if self._pending is not None:
            return None
        buf, pos = self._buf, self._pos
        end = len(buf)
        valid, max_size = self._valid_topics, self.limits.max_msg_size
        topic: bytes | None = None
        bodies: list[bytes] = []
        while buf.startswith(b"PUB ", pos):
            nl = buf.find(b"\n", pos + 4, pos + 5 + MAX_NAME_LENGTH)
            if nl < 0:
                break
            name = self._slice(pos + 4, nl)
            if name != topic:
                if topic is not None or name not in valid:
                    break
                topic = name
            body_at = nl + 5
            if body_at > end:
                break
            (size,) = _SIZE.unpack_from(buf, nl + 1)
            if not 0 < size <= max_size or body_at + size > end:
                break
            bodies.append(self._slice(body_at, body_at + size))
            pos = body_at + size
        if topic is None or not bodies:
            return None
        self._pos = self._scan = pos
        return topic, bodies

    def next_command(self) -> Command | None:
        if self._pending is not None:
            return self._read_body()
        buf = self._buf
        nl = buf.find(b"\n", max(self._scan, self._pos))
        if nl < 0:
            self._scan = len(buf)
            if len(buf) - self._pos > self.limits.max_line_length:
                raise ProtocolError(E_INVALID, "command line too long")
            self._compact()
            return None
        # the same limit whether or not the newline arrived in the same chunk as the line
        if nl - self._pos > self.limits.max_line_length:
            raise ProtocolError(E_INVALID, "command line too long")
        end = nl - 1 if nl > self._pos and buf[nl - 1] == 0x0D else nl
        line = self._slice(self._pos, end)
        self._pos = self._scan = nl + 1
        params = line.split(b" ")
        name = params[0]
        if name not in BODY_COMMANDS:
            return Command(name, tuple(params[1:]))
        if self.before_body is not None:
            self.before_body(name)
        args = tuple(params[1:])
        publish = name == b"PUB" or name == b"MPUB"
        if publish and args and args[0] in self._valid_topics:
            self._pending = Command(name, args)  # the topic was checked on an earlier publish
        else:
            self._pending = _check_body_header(name, args, self.limits)
            if publish and len(self._valid_topics) < _MAX_REMEMBERED_TOPICS:
                self._valid_topics.add(args[0])
        self._body_len = -1
        return self._read_body()

    def _read_body(self) -> Command | None:
        cmd = self._pending
        assert cmd is not None
        buf = self._buf
        if self._body_len < 0:
            if len(buf) - self._pos < 4:
                self._compact()
                return None
            (size,) = _SIZE.unpack_from(buf, self._pos)
            self._pos += 4
            _check_body_size(cmd.name, size, self.limits)
            self._body_len = size
        if len(buf) - self._pos < self._body_len:
            self._compact()
            return None
        body = self._slice(self._pos, self._pos + self._body_len)
        self._pos += self._body_len
        self._scan = self._pos
        self._pending = None
        if cmd.name == b"MPUB":
            cmd.bodies = parse_mpub_body(body, self.limits.max_msg_size, self.limits.max_body_size)
        else:
            cmd.body = body
        return cmd

    def _compact(self) -> None:
        buf = self._buf
        if self._pos > 65536 and type(buf) is bytearray:
            del buf[:self._pos]
            self._scan -= self._pos
            self._pos = 0


FIN_LINE_LENGTH = 4 + MSG_ID_LENGTH + 1  # "FIN <id>\n"
_FIN_SHAPE = ((0, b"F"), (1, b"I"), (2, b"N"), (3, b" "), (FIN_LINE_LENGTH - 1, b"\n"))
_MAX_FIN_RUN = 4096  # lines looked at per call: bounds the work when few are FINs
_MAX_REMEMBERED_TOPICS = 256
_JOIN_LIMIT = 256 * 1024


def _check_topic(name: bytes, params: tuple[bytes, ...], needed: int) -> None:
    if len(params) < needed:
        raise ProtocolError(E_INVALID, f"{name.decode()} insufficient number of parameters")
    if not is_valid_topic_name(params[0]):
        # Go's MPUB names its code twice in this text; clients see it so
        prefix = "E_BAD_TOPIC " if name == b"MPUB" else ""
        raise ProtocolError(E_BAD_TOPIC, f"{prefix}{name.decode()} topic name {quoted(params[0])} is not valid")


def _check_body_header(name: bytes, params: tuple[bytes, ...], limits: CommandLimits) -> Command:
    cmd = Command(name, params)
    if name in (b"PUB", b"MPUB"):
        _check_topic(name, params, 1)
    elif name == b"DPUB":
        _check_topic(name, params, 2)
        try:
            defer_ms = parse_base10(params[1])
        except ValueError:
            raise ProtocolError(E_INVALID, f"DPUB could not parse timeout {raw(params[1])}") from None
        if defer_ms > limits.max_req_timeout_ms:
            raise ProtocolError(
                E_INVALID, f"DPUB timeout {defer_ms} out of range 0-{limits.max_req_timeout_ms}")
        cmd.defer_ms = defer_ms
    elif name == b"AUTH" and params:
        raise ProtocolError(E_INVALID, "AUTH invalid number of parameters")
    return cmd


def _check_body_size(name: bytes, size: int, limits: CommandLimits) -> None:
    if name == b"PUB" and 0 < size <= limits.max_msg_size:
        return
    label = name.decode()
    if name in (b"PUB", b"DPUB"):
        if size <= 0:
            raise ProtocolError(E_BAD_MESSAGE, f"{label} invalid message body size {size}")
        if size > limits.max_msg_size:
            raise ProtocolError(E_BAD_MESSAGE, f"{label} message too big {size} > {limits.max_msg_size}")
    elif name == b"MPUB":
        if size <= 0:
            raise ProtocolError(E_BAD_BODY, f"MPUB invalid body size {size}")
        if size > limits.max_body_size:
            raise ProtocolError(E_BAD_BODY, f"MPUB body too big {size} > {limits.max_body_size}")
    else:  # IDENTIFY, AUTH
        if size > limits.max_body_size:
            raise ProtocolError(E_BAD_BODY, f"{label} body too big {size} > {limits.max_body_size}")
        if size <= 0:
            raise ProtocolError(E_BAD_BODY, f"{label} invalid body size {size}")


def check_sub_params(params: tuple[bytes, ...]) -> tuple[str, str]:
    """SUB's topic and channel, checked as nsqd checks them (after its state checks)."""
    if len(params) < 2:
        raise ProtocolError(E_INVALID, "SUB insufficient number of parameters")
    if not is_valid_topic_name(params[0]):
        raise ProtocolError(E_BAD_TOPIC, f"SUB topic name {quoted(params[0])} is not valid")
    if not is_valid_channel_name(params[1]):
        raise ProtocolError(E_BAD_CHANNEL, f"SUB channel name {quoted(params[1])} is not valid")
    return params[0].decode("ascii"), params[1].decode("ascii")
