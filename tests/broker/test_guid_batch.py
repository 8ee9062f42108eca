"""A batch of IDs (one MPUB's worth) continues the single-ID sequence: unique, increasing,
same layout, even when the batch is larger than one millisecond's 4096 sequence numbers."""
from __future__ import annotations

from nsqd.guid import GuidFactory


def test_batches_interleave_with_single_ids_unique_and_increasing() -> None:
    factory = GuidFactory(7)
    ids = [factory.next_id()] + factory.next_ids(10_000) + [factory.next_id()] + factory.next_ids(3)
    values = [int(i, 16) for i in ids]
    assert len(ids) == 10_005
    assert all(a < b for a, b in zip(values, values[1:]))
    assert all(len(i) == 16 for i in ids)
    assert {(v >> 12) & 1023 for v in values} == {7}
