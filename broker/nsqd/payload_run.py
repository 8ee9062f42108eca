"""The fresh payloads of one publish (an MPUB, a run of pipelined PUBs) back to back in one
``bytes``, with the offset where each starts.

A payload of its own costs a ``bytes`` object (33 bytes of header, rounded up to the
allocator's 16-byte size classes: 272 bytes for a 200-byte message) and a slot in the
queue holding it; in a run it costs its own bytes and a 4-byte offset (about 230 for the
same message). Queues hold runs as they are; a payload becomes a ``bytes`` of its own
only when it leaves a run (delivered, written to disk).

A ``PayloadRun`` is a window (``start``, ``stop``) over data nobody changes: its slices
share that data (a topic hands one run to every channel without copying it), and a
queue taking payloads from the front of its run only moves its own ``start``.
"""
from __future__ import annotations

from array import array
from itertools import accumulate, chain, islice, repeat
from typing import Iterator, Sequence, overload

from nsq_protocol.commands import SameSizeBodies
from nsq_protocol.message import MESSAGE_HEADER

from .guid import SEQUENCE_HEX, IdRun
from .message import MESSAGE_OVERHEAD, Payload

PACK_MIN = 8  # fewer payloads than this stay separate: a run's own cost (~150 bytes) is not worth it


class PayloadRun(Sequence[Payload]):
    __slots__ = ("blob", "offsets", "start", "stop")

    def __init__(self, blob: bytes, offsets: array, start: int = 0, stop: int | None = None) -> None:
        self.blob = blob
        self.offsets = offsets  # offsets[i]: where payload i starts; one more at the end
        self.start = start
        self.stop = len(offsets) - 1 if stop is None else stop

    @classmethod
    def of(cls, payloads: Sequence[Payload]) -> "PayloadRun":
        """The payloads copied into one run."""
        return cls(b"".join(payloads), array("I", accumulate(map(len, payloads), initial=0)))

    def __len__(self) -> int:
        return self.stop - self.start

    @overload
    def __getitem__(self, index: int) -> Payload: ...

    @overload
    def __getitem__(self, index: slice) -> "PayloadRun": ...

    def __getitem__(self, index: int | slice) -> "Payload | PayloadRun":
        if isinstance(index, slice):
            start, stop, step = index.indices(len(self))
            if step != 1:
                raise ValueError("a payload run is sliced without a step")
            return PayloadRun(self.blob, self.offsets, self.start + start, self.start + max(start, stop))
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError("payload run index out of range")
        offsets = self.offsets
        return self.blob[offsets[self.start + index]:offsets[self.start + index + 1]]

    def __iter__(self) -> Iterator[Payload]:
        return iter(self._slices(self.start, self.stop))

    def _slices(self, start: int, stop: int) -> list[Payload]:
        offsets = self.offsets
        return list(map(self.blob.__getitem__,
                        map(slice, islice(offsets, start, stop), islice(offsets, start + 1, stop + 1))))

    def view(self) -> "PayloadRun":
        """The same payloads in a window of its own (for another queue to consume)."""
        return PayloadRun(self.blob, self.offsets, self.start, self.stop)

    def take(self, count: int) -> list[Payload]:
        """The first ``count`` payloads (or all there are), removed from this window."""
        start = self.start
        stop = min(self.stop, start + count)
        self.start = stop
        if stop - start == 1:  # a consumer with RDY 1: no iterator machinery for one slice
            offsets = self.offsets
            return [self.blob[offsets[start]:offsets[stop]]]
        return self._slices(start, stop)

    def take_last(self) -> Payload:
        self.stop -= 1
        offsets = self.offsets
        return self.blob[offsets[self.stop]:offsets[self.stop + 1]]

    @property
    def body_bytes(self) -> int:
        """The bodies' bytes, without the payloads' headers."""
        return self.offsets[self.stop] - self.offsets[self.start] - MESSAGE_OVERHEAD * len(self)

    def __repr__(self) -> str:
        return f"PayloadRun({len(self)} payloads, {self.offsets[self.stop] - self.offsets[self.start]} bytes)"


def encode_run(timestamp: int, ids: list[IdRun], bodies: Sequence[bytes]) -> PayloadRun:
    """Fresh payloads for ``bodies`` in order, built straight into one run: one
    timestamp, IDs from consecutive runs of sequence numbers (as ``encode_payloads``)."""
    if bodies.__class__ is SameSizeBodies and len(ids) == 1:
        return _encode_same_size(timestamp, ids[0], bodies)  # type: ignore[arg-type]
    head = MESSAGE_HEADER.pack(timestamp, 0)
    parts: list[bytes] = []
    done = 0
    for id_run in ids:
        seqs = id_run.sequences
        parts += chain.from_iterable(zip(repeat(head + id_run.prefix), SEQUENCE_HEX[seqs.start:seqs.stop],
                                         bodies[done:done + len(seqs)]))
        done += len(seqs)
    offsets = array("I", accumulate(map(MESSAGE_OVERHEAD.__add__, map(len, bodies)), initial=0))
    return PayloadRun(b"".join(parts), offsets)


_HEX = b"0123456789abcdef"
# the ID's last 3 hex digits (the sequence) as three columns, each indexed by sequence
_SEQUENCE_COLUMNS = tuple(bytes(_HEX[(seq >> shift) & 15] for seq in range(len(SEQUENCE_HEX))) for shift in (8, 4, 0))
_SEQUENCE_AT = MESSAGE_OVERHEAD - 3  # where the sequence's hex digits start in a payload


def _encode_same_size(timestamp: int, ids: IdRun, bodies: SameSizeBodies) -> PayloadRun:
    """``encode_run`` of an MPUB whose messages have one size, with no Python step per
    message: the bodies come out of the MPUB in one ``struct`` unpack, every payload's
    header (timestamp, attempts 0, the ID with sequence digits 000) is the separator of
    one join, and the IDs' three sequence digits are then columns a payload apart,
    written by strided slices. Byte for byte what the general path builds."""
    count = bodies.count
    stride = bodies.size + MESSAGE_OVERHEAD
    head = MESSAGE_HEADER.pack(timestamp, 0) + ids.prefix + b"000"
    blob = bytearray(head)
    blob += head.join(bodies.bodies())
    first = ids.sequences.start
    for at, column in enumerate(_SEQUENCE_COLUMNS, _SEQUENCE_AT):
        blob[at::stride] = column[first:first + count]
    offsets = _OFFSETS.get((count, stride))
    if offsets is None:
        if len(_OFFSETS) >= 64:
            _OFFSETS.clear()
        offsets = _OFFSETS[count, stride] = array("I", range(0, count * stride + 1, stride))
    return PayloadRun(bytes(blob), offsets)


# a run's offsets are never changed (its windows share them): one array per batch shape
_OFFSETS: dict[tuple[int, int], array] = {}


Payloads = list[Payload] | PayloadRun  # a batch of fresh payloads as the topic and channels pass it on

