"""The rows of the NSQ source: one per delivered message, built on the driver as Arrow
record batches so that a partition travels to its executor as one compact object."""
from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from .ledger import Held

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


def record_batch(held: Held[Any], topic: str, channel: str) -> pa.RecordBatch:
    """The rows of ``held``; built column by column in Arrow, never row by row."""
    n = len(held)
    nanos = pa.array(held.timestamps, pa.int64())
    return pa.RecordBatch.from_arrays([
        pa.array(held.ids, pa.binary()).cast(pa.string()),  # nsqd's IDs are ASCII: checked, not decoded one by one
        pa.array(held.bodies, pa.binary()),
        pc.divide(nanos, 1000).cast(pa.timestamp("us", tz="UTC")),
        pa.array(held.attempts, pa.int32()),
        pa.array([conn.address for conn in held.conns], pa.string()),
        pa.repeat(pa.scalar(topic, pa.string()), n),
        pa.repeat(pa.scalar(channel, pa.string()), n),
    ], schema=ARROW_SCHEMA)
