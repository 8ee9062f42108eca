"""Message IDs: 16 hex characters of a 64-bit value, unique per nsqd node.

The value is milliseconds since an epoch (41 bits), the node ID (10 bits) and a sequence
within the millisecond (12 bits), like NSQ's. When a millisecond's 4096 IDs are used up
the generator borrows the next millisecond instead of waiting, so IDs stay unique and
increasing without ever blocking the event loop.
"""
from __future__ import annotations

import time

EPOCH_MS = 1288834974657  # the customary snowflake epoch (2010-11-04)
NODE_BITS = 10
SEQUENCE_BITS = 12
MAX_NODE_ID = (1 << NODE_BITS) - 1


class GuidFactory:
    __slots__ = ("_node", "_last")

    def __init__(self, node_id: int) -> None:
        if not 0 <= node_id <= MAX_NODE_ID:
            raise ValueError(f"node id {node_id} out of range 0-{MAX_NODE_ID}")
        self._node = node_id << SEQUENCE_BITS
        self._last = 0  # (ms << 12) | sequence of the last ID

    def next_id(self) -> bytes:
        ms = time.time_ns() // 1_000_000 - EPOCH_MS
        stamp = ms << SEQUENCE_BITS
        last = self._last
        stamp = last + 1 if stamp <= last else stamp
        self._last = stamp
        ms_part, seq = stamp >> SEQUENCE_BITS, stamp & ((1 << SEQUENCE_BITS) - 1)
        value = (ms_part << (NODE_BITS + SEQUENCE_BITS)) | self._node | seq
        return b"%016x" % value
