"""The replication link's frames, sans-IO: encoders and a streaming decoder.

A frame is ``[size:uint32][kind:uint8][body]`` (``size`` counts kind and body). The link
is nsqd to nsqd only, so nothing here is NSQ's wire format; message payloads travel in
NSQ's on-disk layout, exactly the bytes the owner queued.

The handshake and liveness frames (HELLO, WELCOME, PING) may grow: a reader ignores
bytes after the fields it knows, so that a later version can add a field (say, what it
understands) without an older peer closing the link. Every other frame is read whole or
refused; a sender uses a new field of one only with a peer that said it understands it.
"""
from __future__ import annotations

import struct
import sys
from array import array
from dataclasses import dataclass, field
from enum import IntEnum
from itertools import accumulate, chain, islice
from operator import sub
from typing import NamedTuple, Sequence

from ..payload_run import PayloadRun

MSG_ID_LENGTH = 16
PAYLOAD_MIN = 26  # a payload in NSQ's on-disk layout: timestamp, attempts, ID, then the body
MAX_FRAME = 64 * 1024 * 1024  # an MPUB is at most --max-body-size: far below this

_HEAD = struct.Struct(">IB")
_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")
_U64 = struct.Struct(">Q")
_ID = struct.Struct(f"{MSG_ID_LENGTH}s")
_ENTRY = struct.Struct(">QI")  # defer-until (ms since the epoch, 0 = none), payload size
_SEQ_FRAME_HEAD = struct.Struct(">IBQ")  # a frame's size, kind and seq (an APPEND's head, a whole ACK)


class Kind(IntEnum):
    HELLO = 1  # the sender's node name (its entry in --replication-peer), generation, incarnation
    APPEND = 2  # seq, topic, messages: the owner's new messages, answered by ACK
    ACK = 3  # seq
    FIN = 4  # topic, channel, ids: messages that channel is done with
    CHANNELS = 5  # topic, the channel names it has now
    PING = 6  # liveness, both ways; the sender's wall clock (ms since the epoch), 0 or absent: not told;
    # then (optional) the lost owners the sender holds copies of and asks us, their first
    # live backup, to adopt: a count, then owner, generation, whether the sender fenced it;
    # then (optional) the epoch of the sender's peer list and the epoch it is settled at
    PULL = 7  # seq, owner: send me every copy you hold of that owner's messages
    PULLED = 8  # owner, one inner frame (APPEND, FIN, CHANNELS, EMPTY, PAUSE or REQ) of a PULL's answer
    DONE = 9  # seq: the PULL's answer is complete
    WELCOME = 10  # backup to owner, answering HELLO: the adopted generation it knows, whether it keeps a log of ours
    RESET = 11  # owner to backup: a snapshot of what is live follows (added to what the backup holds)
    SYNCED = 12  # seq: the snapshot is complete; answered by ACK once committed
    DROP = 13  # generation, owner: an adopter took over that owner's copies up to that generation
    # channel state beyond FIN, in order with the messages (a log without them replays as before)
    EMPTY = 14  # topic, channel, ids: a channel emptied of them ("": those copies dropped)
    PAUSE = 15  # topic, channel ("": the topic), paused
    REQ = 16  # topic, channel, due (ms since the epoch), ids: requeued with a delay, due then
    # an owner's fresh publish as one run: seq, topic, due (ms, 0: at once), count, the
    # payloads' sizes (uint32 each), then the payloads back to back. What APPEND says of
    # messages that share one due time, built and read without a Python step per message.
    APPEND_RUN = 17


# what a shard is made of: an owner's frames a backup logs, and a PULL's answer
SHARD_KINDS = frozenset((Kind.APPEND, Kind.APPEND_RUN, Kind.FIN, Kind.CHANNELS, Kind.EMPTY, Kind.PAUSE, Kind.REQ))


class WireError(Exception):
    """A frame that cannot be decoded: the link is closed."""


class AdoptRequest(NamedTuple):
    """A holder of a lost owner's copies asks that owner's first live backup to adopt them
    (it may hold none: wiped while the owner was lost). ``fenced``: the holder fenced
    ``generation`` (an adoption began, or the owner came back as another life), so the
    adoption must happen even if the owner is heard again."""
    owner: str
    generation: int
    fenced: bool


class Entry(NamedTuple):
    """One message's copy: its payload and, for a DPUB, when it is due (ms since the
    epoch; 0: at once). A tuple: a backup makes one per message it receives."""
    payload: bytes
    defer_until_ms: int = 0


@dataclass
class Frame:
    kind: Kind
    seq: int = 0
    name: str = ""  # HELLO's node, PULL's, PULLED's and DROP's owner
    incarnation: str = ""  # HELLO: the sender's data path's life ("": not told)
    generation: int = 0  # HELLO's (the sender's), PULL's and DROP's (the adopted one), WELCOME's fence
    keeps_log: bool = False  # WELCOME: the backup has a log of the owner's current generation
    topic: str = ""
    channel: str = ""
    entries: list[Entry] = field(default_factory=list)
    ids: list[bytes] = field(default_factory=list)
    channels: list[str] = field(default_factory=list)
    inner: "Frame | None" = None
    paused: bool = False  # PAUSE
    due_ms: int = 0  # REQ; APPEND_RUN: when its messages are due (0: at once)
    clock_ms: int = 0  # PING: the sender's wall clock when it sent it
    payloads: Sequence[bytes] = field(default_factory=list)  # APPEND_RUN's (a PayloadRun, as it came)
    adopt: list["AdoptRequest"] = field(default_factory=list)  # PING's
    epoch: int = 0  # PING: the sender's peer list's epoch
    settled: int = 0  # PING: the epoch the sender's copies sit in its ring of

    def messages(self) -> list[Entry]:
        """An APPEND's or APPEND_RUN's messages, each with its due time."""
        if self.kind is Kind.APPEND_RUN:
            return [Entry(p, self.due_ms) for p in self.payloads]
        return self.entries


def _text(value: str) -> bytes:
    data = value.encode()
    return _U16.pack(len(data)) + data


def _framed(kind: Kind, body: bytes) -> bytes:
    return _HEAD.pack(len(body) + 1, kind) + body


def hello(node: str, generation: int = 0, incarnation: str = "") -> bytes:
    """``generation``: the owner's, starting at 1 (0: not told, as in a log of an older
    version, read as 1); ``incarnation``: which life of the owner's data path ("": not
    told; only with a generation)."""
    if not generation:
        return _framed(Kind.HELLO, _text(node))
    return _framed(Kind.HELLO, _text(node) + _U64.pack(generation) + (_text(incarnation) if incarnation else b""))


def welcome(fence: int, keeps_log: bool) -> bytes:
    return _framed(Kind.WELCOME, _U64.pack(fence) + bytes((1 if keeps_log else 0,)))


def reset() -> bytes:
    return _framed(Kind.RESET, b"")


def synced(seq: int) -> bytes:
    return _framed(Kind.SYNCED, _U64.pack(seq))


def drop(owner: str, generation: int) -> bytes:
    return _framed(Kind.DROP, _U64.pack(generation) + _text(owner))


def append(seq: int, topic: str, entries: list[Entry]) -> bytes:
    parts = [_U64.pack(seq), _text(topic), _U32.pack(len(entries))]
    for entry in entries:
        parts.append(_ENTRY.pack(entry.defer_until_ms, len(entry.payload)))
        parts.append(entry.payload)
    return _framed(Kind.APPEND, b"".join(parts))


def append_fresh(seq: int, topic: str, payloads: Sequence[bytes], defer_until_ms: int) -> bytes:
    """An owner's publish (payloads sharing one due time) as an APPEND_RUN. A
    ``PayloadRun`` goes as its blob's window and sizes taken from its offsets, a list as
    its join: C loops either way, no Python step per message."""
    if len(payloads) == 1:  # a lone PUB: the C loops' own setup would cost more than it
        payload = payloads[0]
        name = _text(topic)
        size = _SEQ_FRAME_HEAD.size - 4 + len(name) + _ONE_RUN.size + len(payload)
        return b"".join((_SEQ_FRAME_HEAD.pack(size, Kind.APPEND_RUN, seq), name,
                         _ONE_RUN.pack(defer_until_ms, 1, len(payload)), payload))
    if isinstance(payloads, PayloadRun):
        start, stop, offsets = payloads.start, payloads.stop, payloads.offsets
        blob = payloads.blob[offsets[start]:offsets[stop]]
        sizes = array(_SIZES, map(sub, islice(offsets, start + 1, stop + 1), islice(offsets, start, stop)))
    else:
        blob = b"".join(payloads)
        sizes = array(_SIZES, map(len, payloads))
    return _run_frame(seq, topic, defer_until_ms, sizes, blob)


def _run_frame(seq: int, topic: str, defer_until_ms: int, sizes: array, blob: bytes) -> bytes:
    count = len(sizes)
    if _SWAP:
        sizes.byteswap()
    name = _text(topic)
    size = _SEQ_FRAME_HEAD.size - 4 + len(name) + _RUN_HEAD.size + 4 * count + len(blob)
    return b"".join((_SEQ_FRAME_HEAD.pack(size, Kind.APPEND_RUN, seq), name, _RUN_HEAD.pack(defer_until_ms, count),
                     sizes.tobytes(), blob))


_RUN_HEAD = struct.Struct(">QI")  # APPEND_RUN's due time and count
_ONE_RUN = struct.Struct(">QII")  # an APPEND_RUN of one message: due time, count 1, its size
_SWAP = sys.byteorder == "little"  # the sizes travel big-endian, as every other field
_SIZES = "I" if array("I").itemsize == 4 else "L"  # an array of uint32


def ack(seq: int) -> bytes:
    return _framed(Kind.ACK, _U64.pack(seq))


def fin(topic: str, channel: str, ids: list[bytes]) -> bytes:
    return _framed(Kind.FIN, b"".join((_text(topic), _text(channel), _U32.pack(len(ids)), *ids)))


def grouped_by_due(dues: dict[bytes, int]) -> list[tuple[int, list[bytes]]]:
    """IDs requeued with a delay (ID -> due, ms), grouped by due time, earliest first:
    one REQ frame each."""
    by_due: dict[int, list[bytes]] = {}
    for msg_id, due_ms in dues.items():
        by_due.setdefault(due_ms, []).append(msg_id)
    return sorted(by_due.items())


def channels(topic: str, names: list[str]) -> bytes:
    return _framed(Kind.CHANNELS, b"".join((_text(topic), _U16.pack(len(names)), *map(_text, names))))


def empty(topic: str, channel: str, ids: Sequence[bytes]) -> bytes:
    """``channel`` emptied: it is done with ``ids`` (as a FIN; named one by one, so that
    a resend after a reconnect takes no copy published since); ``channel`` "": those
    copies are dropped, for every channel."""
    return _framed(Kind.EMPTY, b"".join((_text(topic), _text(channel), _U32.pack(len(ids)), *ids)))


def pause(topic: str, channel: str, paused: bool) -> bytes:
    return _framed(Kind.PAUSE, _text(topic) + _text(channel) + bytes((1 if paused else 0,)))


def req(topic: str, channel: str, due_ms: int, ids: Sequence[bytes]) -> bytes:
    return _framed(Kind.REQ, b"".join((_text(topic), _text(channel), _U64.pack(due_ms), _U32.pack(len(ids)), *ids)))


def ping(clock_ms: int = 0, adopt: Sequence[AdoptRequest] = (), epoch: int = 0, settled: int = 0) -> bytes:
    """``clock_ms``: the sender's wall clock, from which a backup learns how far the
    owner's clock (in which its due times are written) is from its own. ``adopt``: what
    the sender asks the receiver to adopt. ``epoch``, ``settled``: its peer list's epoch,
    and the epoch since which its copies sit in its ring of that list (membership.py).
    A peer of an older version ignores what it does not know."""
    if not adopt and not epoch and not settled:
        return _framed(Kind.PING, _U64.pack(clock_ms) if clock_ms else b"")
    asks = b"".join(_text(a.owner) + _U64.pack(a.generation) + bytes((1 if a.fenced else 0,)) for a in adopt)
    tail = _U64.pack(epoch) + _U64.pack(settled) if epoch or settled else b""
    return _framed(Kind.PING, _U64.pack(clock_ms) + _U16.pack(len(adopt)) + asks + tail)


def pull(seq: int, owner: str, generation: int) -> bytes:
    """Also a fence: the backup asked accepts no more of ``owner``'s frames of that
    generation or older, so its answer holds every copy it acknowledged."""
    return _framed(Kind.PULL, _U64.pack(seq) + _text(owner) + _U64.pack(generation))


def pulled(owner: str, inner: bytes) -> bytes:
    return _framed(Kind.PULLED, _text(owner) + inner)


def done(seq: int) -> bytes:
    return _framed(Kind.DONE, _U64.pack(seq))


def only_acks(data: bytes) -> int | None:
    """The highest seq when ``data`` is whole ACK frames and nothing else (what an owner
    mostly reads from a backup; ACKs are cumulative), else None."""
    if not data or len(data) % _SEQ_FRAME_HEAD.size:
        return None
    highest = None
    for size, kind, seq in _SEQ_FRAME_HEAD.iter_unpack(data):
        if size != _SEQ_FRAME_HEAD.size - 4 or kind != Kind.ACK:
            return None
        highest = seq if highest is None or seq > highest else highest
    return highest


class _Reader:
    def __init__(self, data: memoryview) -> None:
        self.data = data
        self.at = 0

    def take(self, size: int) -> bytes:
        if self.at + size > len(self.data):
            raise WireError("frame ends early")
        chunk = bytes(self.data[self.at:self.at + size])
        self.at += size
        return chunk

    def take_ids(self, count: int) -> list[bytes]:
        """``count`` message IDs back to back, cut in a C loop (a FIN of a batch is read
        for every message a consumer finishes)."""
        return list(chain.from_iterable(_ID.iter_unpack(self.take(MSG_ID_LENGTH * count))))

    def u16(self) -> int:
        return int(_U16.unpack(self.take(2))[0])

    def u32(self) -> int:
        return int(_U32.unpack(self.take(4))[0])

    def u64(self) -> int:
        return int(_U64.unpack(self.take(8))[0])

    def text(self) -> str:
        try:
            return self.take(self.u16()).decode()
        except UnicodeDecodeError:
            raise WireError("name is not UTF-8") from None

    def end(self) -> None:
        if self.at != len(self.data):
            raise WireError("bytes after the frame's body")


def decode(kind_byte: int, body: memoryview) -> Frame:
    """One frame from its kind and body."""
    try:
        kind = Kind(kind_byte)
    except ValueError:
        raise WireError(f"unknown frame kind {kind_byte}") from None
    r = _Reader(body)
    if kind is Kind.HELLO:
        frame = Frame(kind, name=r.text())
        frame.generation = r.u64() if r.at < len(body) else 0
        frame.incarnation = r.text() if r.at < len(body) else ""
        return frame  # fields added later are not read here
    elif kind is Kind.APPEND:
        seq, topic, count = r.u64(), r.text(), r.u32()
        entries = []
        for _ in range(count):
            defer_until, size = _ENTRY.unpack(r.take(_ENTRY.size))
            entries.append(Entry(r.take(size), defer_until))
        frame = Frame(kind, seq=seq, topic=topic, entries=entries)
    elif kind is Kind.APPEND_RUN:
        frame = _decode_run(r)
    elif kind in (Kind.ACK, Kind.DONE, Kind.SYNCED):
        frame = Frame(kind, seq=r.u64())
    elif kind is Kind.FIN:
        topic, channel, count = r.text(), r.text(), r.u32()
        frame = Frame(kind, topic=topic, channel=channel, ids=r.take_ids(count))
    elif kind is Kind.CHANNELS:
        topic, count = r.text(), r.u16()
        frame = Frame(kind, topic=topic, channels=[r.text() for _ in range(count)])
    elif kind is Kind.EMPTY:
        topic, channel, count = r.text(), r.text(), r.u32()
        frame = Frame(kind, topic=topic, channel=channel, ids=r.take_ids(count))
    elif kind is Kind.PAUSE:
        frame = Frame(kind, topic=r.text(), channel=r.text())
        frame.paused = r.take(1) != b"\x00"
    elif kind is Kind.REQ:
        topic, channel, due, count = r.text(), r.text(), r.u64(), r.u32()
        frame = Frame(kind, topic=topic, channel=channel, due_ms=due, ids=r.take_ids(count))
    elif kind is Kind.PING:
        if len(body) < _U64.size:
            return Frame(kind)  # no clock (too short for one: a later version's field is ignored)
        frame = Frame(kind, clock_ms=r.u64())
        if len(body) - r.at >= _U16.size:
            for _ in range(r.u16()):
                owner = r.text()
                frame.adopt.append(AdoptRequest(owner, r.u64(), r.take(1) != b"\x00"))
        if len(body) - r.at >= 2 * _U64.size:
            frame.epoch, frame.settled = r.u64(), r.u64()
        return frame  # fields added later are not read here
    elif kind is Kind.RESET:
        frame = Frame(kind)
    elif kind is Kind.PULL:
        frame = Frame(kind, seq=r.u64(), name=r.text())
        frame.generation = r.u64() if r.at < len(body) else 0  # 0: from a node before generations
    elif kind is Kind.WELCOME:
        return Frame(kind, generation=r.u64(), keeps_log=r.take(1) != b"\x00")
    elif kind is Kind.DROP:
        generation = r.u64()
        frame = Frame(kind, name=r.text(), generation=generation)
    else:  # PULLED
        owner = r.text()
        inner = Decoder()
        inner.feed(r.take(len(body) - r.at))
        frames = inner.frames()
        if len(frames) != 1 or inner.buffered or frames[0].kind not in SHARD_KINDS:
            raise WireError("PULLED must hold one APPEND, APPEND_RUN, FIN, CHANNELS, EMPTY, PAUSE or REQ frame")
        frame = Frame(kind, name=owner, inner=frames[0])
    r.end()
    return frame


def _decode_run(r: _Reader) -> Frame:
    seq, topic = r.u64(), r.text()
    due, count = _RUN_HEAD.unpack(r.take(_RUN_HEAD.size))
    if count == 1:  # a lone PUB: no arrays
        (size,) = _U32.unpack(r.take(4))
        payloads = [r.take(len(r.data) - r.at)]
        if size != len(payloads[0]):
            raise WireError("APPEND_RUN's sizes do not add up to its payloads")
    else:
        sizes = array(_SIZES)
        sizes.frombytes(r.take(4 * count))
        if _SWAP:
            sizes.byteswap()
        blob = r.take(len(r.data) - r.at)
        if sum(sizes) != len(blob):
            raise WireError("APPEND_RUN's sizes do not add up to its payloads")
        if count and min(sizes) < PAYLOAD_MIN:
            raise WireError("APPEND_RUN holds a payload too short for a message")
        # not cut into payloads here: a backup keeps the run as it came (see Shard)
        payloads = PayloadRun(blob, array(_SIZES, accumulate(sizes, initial=0)))
    if count == 1 and len(payloads[0]) < PAYLOAD_MIN:
        raise WireError("APPEND_RUN holds a payload too short for a message")
    return Frame(Kind.APPEND_RUN, seq=seq, topic=topic, due_ms=due, payloads=payloads)


class Decoder:
    """Bytes in, whole frames out."""

    def __init__(self) -> None:
        self._buffer = bytearray()

    @property
    def buffered(self) -> int:
        return len(self._buffer)

    def feed(self, data: bytes) -> None:
        self._buffer += data

    def frames(self) -> list[Frame]:
        return [frame for frame, _ in self.frames_with_bytes()]

    def frames_with_bytes(self) -> list[tuple[Frame, bytes]]:
        """Each whole frame with its own bytes (what a backup writes to its log)."""
        out: list[tuple[Frame, bytes]] = []
        buffer = self._buffer
        at = 0
        view = memoryview(buffer)
        try:
            while len(buffer) - at >= _HEAD.size:
                size, kind = _HEAD.unpack_from(buffer, at)
                if size < 1 or size > MAX_FRAME:
                    raise WireError(f"frame size {size} out of bounds")
                if len(buffer) - at - 4 < size:
                    break
                out.append((decode(kind, view[at + _HEAD.size:at + 4 + size]), bytes(view[at:at + 4 + size])))
                at += 4 + size
        finally:
            view.release()
        del buffer[:at]
        return out


def raw_frames(data: bytes) -> list[tuple[Frame, bytes]]:
    """Every whole frame in ``data`` with its own bytes, and nothing of a torn tail
    (a log cut short by a crash ends with part of a frame)."""
    out: list[tuple[Frame, bytes]] = []
    at = 0
    view = memoryview(data)
    while len(data) - at >= _HEAD.size:
        size, kind = _HEAD.unpack_from(data, at)
        if size < 1 or size > MAX_FRAME or len(data) - at - 4 < size:
            break
        try:
            frame = decode(kind, view[at + _HEAD.size:at + 4 + size])
        except WireError:
            break
        out.append((frame, data[at:at + 4 + size]))
        at += 4 + size
    return out
