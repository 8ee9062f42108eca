"""The rows of the NSQ source: one per delivered message, built on the driver as Arrow
record batches so that a partition travels to its executor as one compact object."""
from __future__ import annotations

from itertools import groupby
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from nsq_protocol.message import MESSAGE_HEADER_SIZE

from .ledger import ID_END, ID_START, Held

SCHEMA_DDL = ("id string, body binary, timestamp timestamp, attempts int, "
              "nsqd_address string, topic string, channel string")

# what Spark expects for SCHEMA_DDL; a record batch must match it exactly
ARROW_SCHEMA = pa.schema([
    ("id", pa.string()),
    ("body", pa.binary()),
    ("timestamp", pa.timestamp("us", tz="UTC")),
    ("attempts", pa.int32()),
    ("nsqd_address", pa.string()),
    ("topic", pa.string()),
    ("channel", pa.string()),
])

_UNSIGNED = {2: pa.uint16(), 8: pa.uint64()}


def _big_endian(frames: pa.BinaryArray, start: int, width: int) -> pa.Array:
    """The unsigned big-endian integer at bytes ``start:start + width`` of every frame,
    computed over the whole column at once (Arrow reads integers little-endian)."""
    raw = pc.binary_slice(frames, start, start + width).cast(pa.binary(width))
    kind = _UNSIGNED[width]
    swapped = pa.Array.from_buffers(kind, len(raw), [None, raw.buffers()[1]])
    value: pa.Array | None = None
    for k in range(width):
        byte = pc.bit_wise_and(pc.shift_right(swapped, pa.scalar(8 * k, kind)), pa.scalar(0xFF, kind))
        part = pc.shift_left(byte, pa.scalar(8 * (width - 1 - k), kind))
        value = part if value is None else pc.bit_wise_or(value, part)
    assert value is not None
    return value


def _addresses(conns: list[Any]) -> pa.Array:
    """Each message's nsqd address, one Arrow call per run of one connection's messages."""
    runs = [pa.repeat(pa.scalar(conn.address, pa.string()), len(list(run))) for conn, run in groupby(conns)]
    return pa.concat_arrays(runs) if runs else pa.array([], pa.string())


def record_batch(held: Held[Any], topic: str, channel: str) -> pa.RecordBatch:
    """The rows of ``held``, cut out of the message frames column by column in Arrow
    (a frame: timestamp int64, attempts uint16, ID 16 bytes, body; all big-endian)."""
    n = len(held)
    frames = pa.array(held.frames, pa.binary())
    nanos = _big_endian(frames, 0, 8).cast(pa.int64())
    return pa.RecordBatch.from_arrays([
        pc.binary_slice(frames, ID_START, ID_END).cast(pa.string()),  # nsqd's IDs are ASCII: checked, not decoded one by one
        pc.binary_slice(frames, MESSAGE_HEADER_SIZE, 2**31 - 1),
        pc.divide(nanos, 1000).cast(pa.timestamp("us", tz="UTC")),
        _big_endian(frames, 8, 2).cast(pa.int32()),
        _addresses(held.conns),
        pa.repeat(pa.scalar(topic, pa.string()), n),
        pa.repeat(pa.scalar(channel, pa.string()), n),
    ], schema=ARROW_SCHEMA)
