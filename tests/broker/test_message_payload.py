"""A queued message is its encoded payload: NSQ's disk layout, decodable by the protocol's
own decoder, with the attempts of a Message written back when it is stored again."""
from __future__ import annotations

from nsq_protocol import decode_message
from nsqd.guid import GuidFactory, IdRun
from nsqd.message import Message, encode_payloads


def test_payloads_of_a_batch_carry_its_ids_across_a_millisecond_boundary() -> None:
    runs = [IdRun(b"00000000000a1", range(4094, 4096)), IdRun(b"00000000000a2", range(0, 2))]
    payloads = encode_payloads(1_700_000_000_000_000_000, runs, [b"a", b"b", b"c", b"d"])
    decoded = [decode_message(p) for p in payloads]
    assert [m.id for m in decoded] == [b"00000000000a1ffe", b"00000000000a1fff",
                                       b"00000000000a2000", b"00000000000a2001"]
    assert [m.body for m in decoded] == [b"a", b"b", b"c", b"d"]
    assert {(m.timestamp, m.attempts) for m in decoded} == {(1_700_000_000_000_000_000, 0)}


def test_a_batch_from_the_factory_has_the_ids_it_would_give_one_at_a_time() -> None:
    factory = GuidFactory(5)
    runs = factory.next_runs(5000)  # more than one millisecond's 4096 sequence numbers
    ids = [decode_message(p).id for p in encode_payloads(1, runs, [b"x"] * 5000)]
    values = [int(i, 16) for i in ids]
    assert len(set(ids)) == 5000 and values == sorted(values)
    assert all(len(i) == 16 and (v >> 12) & 1023 == 5 for i, v in zip(ids, values))
    assert int(factory.next_id(), 16) > values[-1]


def test_a_message_stores_its_current_attempts_and_keeps_the_rest() -> None:
    msg = Message.create(b"0123456789abcdef", b"body", timestamp=42)
    assert msg.encode() is msg.payload  # nothing changed: the same bytes
    msg.attempts = 3
    stored = decode_message(msg.encode())
    assert (stored.id, stored.body, stored.timestamp, stored.attempts) == (b"0123456789abcdef", b"body", 42, 3)
    assert (msg.body, msg.timestamp) == (b"body", 42)
