"""The rows of the NSQ source: one per delivered message, built on the driver as Arrow
record batches so that a partition travels to its executor as one compact object."""
from __future__ import annotations

from typing import Sequence

import pyarrow as pa

from nsq_client import Message

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


def record_batch(messages: Sequence[Message], topic: str, channel: str) -> pa.RecordBatch:
    n = len(messages)
    return pa.RecordBatch.from_arrays([
        pa.array([m.id.decode("ascii") for m in messages], pa.string()),
        pa.array([m.body for m in messages], pa.binary()),
        pa.array([m.timestamp // 1000 for m in messages], pa.timestamp("us", tz="UTC")),
        pa.array([m.attempts for m in messages], pa.int32()),
        pa.array([m.nsqd_address for m in messages], pa.string()),
        pa.array([topic] * n, pa.string()),
        pa.array([channel] * n, pa.string()),
    ], schema=ARROW_SCHEMA)


def split_evenly(items: Sequence[Message], parts: int) -> list[Sequence[Message]]:
    """At most ``parts`` consecutive slices of near-equal size, none empty."""
    parts = max(1, min(parts, len(items)))
    size, extra = divmod(len(items), parts)
    slices, begin = [], 0
    for i in range(parts):
        end = begin + size + (1 if i < extra else 0)
        if end > begin:
            slices.append(items[begin:end])
        begin = end
    return slices
