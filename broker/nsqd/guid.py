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
        stamp = (time.time_ns() // 1_000_000 - EPOCH_MS) << SEQUENCE_BITS
        last = self._last
        stamp = last + 1 if stamp <= last else stamp
        self._last = stamp
        seq_mask = (1 << SEQUENCE_BITS) - 1
        return b"%016x" % (((stamp & ~seq_mask) << NODE_BITS) | self._node | (stamp & seq_mask))

    def next_ids(self, count: int) -> list[bytes]:
        """``count`` consecutive IDs from one clock reading (an MPUB's worth at once)."""
        stamp = (time.time_ns() // 1_000_000 - EPOCH_MS) << SEQUENCE_BITS
        last = self._last
        first = last + 1 if stamp <= last else stamp
        self._last = first + count - 1
        node, seq_mask = self._node, (1 << SEQUENCE_BITS) - 1
        # shifting the millisecond part up past the node bits leaves the sequence in place
        return [b"%016x" % (((s & ~seq_mask) << NODE_BITS) | node | (s & seq_mask))
                for s in range(first, first + count)]
