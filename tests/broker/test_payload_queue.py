"""The memory queue holding runs of payloads gives back exactly what a plain deque of the
same messages would, in the same order, whatever mix of operations; runs are shared by
the queues they are put in, not copied; and a run costs far less memory than separate
payloads."""
from __future__ import annotations

import tracemalloc
from collections import deque

from hypothesis import given, settings
from hypothesis import strategies as st

from nsq_protocol.message import decode_message
from nsqd.guid import GuidFactory
from nsqd.message import Message, encode_payloads
from nsqd.payload_queue import PayloadQueue
from nsqd.payload_run import PACK_MIN, PayloadRun, encode_run

bodies = st.lists(st.binary(max_size=40), min_size=1, max_size=30)
operation = st.one_of(
    st.tuples(st.just("extend"), bodies, st.booleans()),  # as a run, or as a list
    st.tuples(st.just("append_message"), st.binary(max_size=10)),
    st.tuples(st.just("popleft")),
    st.tuples(st.just("popleft_many"), st.integers(0, 40)),
    st.tuples(st.just("popleft_fresh"), st.integers(1, 40)),
    st.tuples(st.just("popleft_fresh_one")),
    st.tuples(st.just("pop")),
)


def payloads_of(items: list[bytes]) -> list[bytes]:
    """Distinct payloads (a 26-byte header, then the body) so any mix-up shows."""
    return [b"%026d" % i + body for i, body in enumerate(items)]


def same(item: object) -> object:
    return ("msg", item.payload) if isinstance(item, Message) else item


@settings(max_examples=200, deadline=None)
@given(st.lists(operation, max_size=40))
def test_any_mix_of_operations_gives_what_a_deque_gives(ops: list[tuple]) -> None:
    queue, model = PayloadQueue(), deque()
    serial = 0
    for op in ops:
        kind = op[0]
        if kind == "extend":
            payloads = [b"%06d" % (serial + i) + p for i, p in enumerate(payloads_of(op[1]))]
            serial += len(payloads)
            queue.extend(PayloadRun.of(payloads) if op[2] else payloads)
            model.extend(payloads)
        elif kind == "append_message":
            msg = Message(b"%026d" % serial + op[1], 0)
            serial += 1
            queue.append(msg)
            model.append(msg)
        elif kind == "popleft" and model:
            assert same(queue.popleft()) == same(model.popleft())
        elif kind == "pop" and model:
            assert same(queue.pop()) == same(model.pop())
        elif kind == "popleft_many":
            expected = [model.popleft() for _ in range(min(op[1], len(model)))]
            assert list(map(same, queue.popleft_many(op[1]))) == list(map(same, expected))
        elif kind == "popleft_fresh":
            expected = []
            while model and len(expected) < op[1] and not isinstance(model[0], Message):
                expected.append(model.popleft())
            batches = queue.popleft_fresh(op[1])
            assert all(batches) and [p for batch in batches for p in batch] == expected
        elif kind == "popleft_fresh_one":
            fresh = bool(model) and not isinstance(model[0], Message)
            assert queue.popleft_fresh_one() == (model.popleft() if fresh else None)
        assert len(queue) == len(model) and bool(queue) == bool(model)
        assert list(map(same, queue)) == list(map(same, model))
        assert queue.head_is_fresh() == (bool(model) and not isinstance(model[0], Message))


def test_a_run_put_in_two_queues_is_shared_and_each_takes_its_own_copy_out() -> None:
    payloads = payloads_of([b"body %d" % i for i in range(PACK_MIN * 2)])
    run = PayloadRun.of(payloads)
    first, second = PayloadQueue(), PayloadQueue()
    first.extend(run)
    second.extend(run)
    assert first.popleft_many(3) == payloads[:3]
    assert second.popleft_many(100) == payloads  # the first queue's taking moved nothing here
    assert list(first) == payloads[3:] and len(run) == len(payloads)
    [batch] = first.popleft_fresh(100)
    assert batch.__class__ is PayloadRun and batch.blob is run.blob and list(batch) == payloads[3:]


def test_a_list_long_enough_is_packed_and_a_short_one_is_not() -> None:
    long, short = PayloadQueue(), PayloadQueue()
    long.extend(payloads_of([b"x"] * PACK_MIN))
    short.extend(payloads_of([b"x"] * (PACK_MIN - 1)))
    assert [e.__class__ for e in long._entries] == [PayloadRun]
    assert [e.__class__ for e in short._entries] == [bytes] * (PACK_MIN - 1)


def test_a_run_encodes_what_separate_payloads_encode() -> None:
    guid = GuidFactory(7)
    runs = guid.next_runs(300)
    many = [b"m%d" % i * (i % 5) for i in range(300)]
    run = encode_run(1_700_000_000_000_000_000, runs, many)
    assert list(run) == encode_payloads(1_700_000_000_000_000_000, runs, many)
    assert run.body_bytes == sum(map(len, many)) and run[3:9].body_bytes == sum(map(len, many[3:9]))
    assert [decode_message(p).body for p in run[10:20]] == many[10:20]
    assert run[-1] == list(run)[-1] and len(run[5:2]) == 0


def test_a_queued_run_costs_its_bytes_and_little_more() -> None:
    """200-byte bodies: a payload of its own is a bytes object of 226 bytes plus its
    header and allocator rounding; in a run it is 226 bytes and a 4-byte offset."""
    guid = GuidFactory(1)
    batch = [b"x" * 200] * 100
    tracemalloc.start()
    try:
        queue = PayloadQueue()
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(100):
            queue.extend(encode_run(1, guid.next_runs(100), batch))
        per_message = (tracemalloc.get_traced_memory()[0] - before) / len(queue)
    finally:
        tracemalloc.stop()
    assert len(queue) == 10_000 and 226 <= per_message < 236


@settings(max_examples=300, deadline=None)
@given(size=st.integers(1, 300), count=st.integers(2, 400), first=st.integers(0, 4095),
       fill=st.sampled_from([b"\x00", b"\x01", b"\x00\x00\x00\x01", b"x", b"\xff\x00"]))
def test_an_mpub_of_one_size_encodes_straight_from_its_body_what_separate_bodies_encode(
        size: int, count: int, first: int, fill: bytes) -> None:
    """The MPUB's bodies left in its body (``SameSizeBodies``): the run built by one join
    and strided writes is byte for byte the general path's, for any sequence start in
    the millisecond (a run never crosses one) and bodies that look like size fields."""
    from nsq_protocol.commands import SameSizeBodies, encode_mpub_body, parse_mpub_body
    from nsqd.guid import IdRun
    bodies = [(fill * size)[:size - 1] + bytes([i % 256]) for i in range(count)]
    parsed = parse_mpub_body(encode_mpub_body(bodies), 1 << 20)
    assert type(parsed) is SameSizeBodies and parsed == bodies
    count = min(count, 4096 - first)
    ids = [IdRun(b"0123456789abc", range(first, first + count))]
    if count >= 2:
        parsed = parse_mpub_body(encode_mpub_body(bodies[:count]), 1 << 20)
        assert type(parsed) is SameSizeBodies
    else:
        parsed = bodies[:count]
    fused, general = encode_run(1_700_000_000_123_456_789, ids, parsed), encode_run(1_700_000_000_123_456_789, ids, bodies[:count])
    assert fused.blob == general.blob and list(fused.offsets) == list(general.offsets)
    assert list(fused) == encode_payloads(1_700_000_000_123_456_789, ids, bodies[:count])
