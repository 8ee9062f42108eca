"""Message IDs: 16 hex characters of a 64-bit value, unique per nsqd node.

The value is milliseconds since an epoch (41 bits), the node ID (10 bits) and a sequence
within the millisecond (12 bits), like NSQ's. When a millisecond's 4096 IDs are used up
the generator borrows the next millisecond instead of waiting, so IDs stay unique and
increasing without ever blocking the event loop.
"""
from __future__ import annotations

import time
from typing import NamedTuple

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
        return [run.prefix + SEQUENCE_HEX[seq] for run in self.next_runs(count) for seq in run.sequences]

    def next_runs(self, count: int) -> list[IdRun]:
        """``count`` consecutive IDs from one clock reading, as one run per millisecond
        they span (almost always one)."""
        stamp = (time.time_ns() // 1_000_000 - EPOCH_MS) << SEQUENCE_BITS
        last = self._last
        first = last + 1 if stamp <= last else stamp
        end = first + count
        self._last = end - 1
        node, seq_mask = self._node, (1 << SEQUENCE_BITS) - 1
        runs: list[IdRun] = []
        while first < end:
            run_end = min(end, (first | seq_mask) + 1)  # the end of this millisecond's sequence
            # shifting the millisecond part up past the node bits leaves the sequence in place
            prefix = b"%013x" % ((((first & ~seq_mask) << NODE_BITS) | node) >> SEQUENCE_BITS)
            runs.append(IdRun(prefix, range(first & seq_mask, (first & seq_mask) + run_end - first)))
            first = run_end
        return runs


class IdRun(NamedTuple):
    """IDs that differ only in their sequence number: each is ``prefix`` (the
    millisecond and node, 13 hex digits) followed by ``SEQUENCE_HEX[seq]``."""

    prefix: bytes
    sequences: range


# the 12-bit sequence is the last 3 of the 16 hex digits: formatted once, looked up after
SEQUENCE_HEX = [b"%03x" % seq for seq in range(1 << SEQUENCE_BITS)]
