"""Message IDs: 16 lowercase hex characters of a 64-bit value made of milliseconds, the
node ID and a sequence; unique and increasing, even past 4096 IDs in one millisecond."""
from __future__ import annotations

import re
import time

import pytest

from nsqd.guid import EPOCH_MS, MAX_NODE_ID, GuidFactory

NODE_SHIFT = 12
TIME_SHIFT = 22


def value(msg_id: bytes) -> int:
    return int(msg_id, 16)


def test_ids_are_16_lowercase_hex_characters() -> None:
    factory = GuidFactory(5)
    for _ in range(100):
        msg_id = factory.next_id()
        assert isinstance(msg_id, bytes) and re.fullmatch(rb"[0-9a-f]{16}", msg_id), msg_id


def test_ids_are_unique_and_increasing_even_within_one_millisecond() -> None:
    factory = GuidFactory(1)
    values = [value(factory.next_id()) for _ in range(20_000)]  # far more than 4096 per ms
    assert all(a < b for a, b in zip(values, values[1:]))


@pytest.mark.parametrize("node", [0, 1, 513, MAX_NODE_ID])
def test_the_node_id_sits_in_its_own_bits(node: int) -> None:
    factory = GuidFactory(node)
    for _ in range(5000):
        assert (value(factory.next_id()) >> NODE_SHIFT) & MAX_NODE_ID == node


def test_two_nodes_never_share_an_id() -> None:
    a, b = GuidFactory(1), GuidFactory(2)
    from_a = {a.next_id() for _ in range(5000)}
    from_b = {b.next_id() for _ in range(5000)}
    assert not from_a & from_b


def test_the_time_part_is_milliseconds_since_the_epoch() -> None:
    factory = GuidFactory(7)
    before = time.time_ns() // 1_000_000 - EPOCH_MS
    stamp = value(factory.next_id()) >> TIME_SHIFT
    after = time.time_ns() // 1_000_000 - EPOCH_MS
    assert before <= stamp <= after


def test_borrowed_milliseconds_stay_close_to_the_clock() -> None:
    factory = GuidFactory(3)
    ids = [factory.next_id() for _ in range(4096 * 3)]
    now = time.time_ns() // 1_000_000 - EPOCH_MS
    assert (value(ids[-1]) >> TIME_SHIFT) <= now + 3


@pytest.mark.parametrize("node", [-1, MAX_NODE_ID + 1])
def test_node_ids_out_of_range_are_refused(node: int) -> None:
    with pytest.raises(ValueError):
        GuidFactory(node)
