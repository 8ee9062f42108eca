"""The load's bookkeeping: what counts as lost, duplicated, failed-but-delivered, and
throughput per phase."""
from __future__ import annotations

from nsq_local.ledger import Ledger, message_id


def test_ids_are_unique_per_topic_and_carry_run_and_topic() -> None:
    ledger = Ledger(["a", "b"], ["c"], run="r1")
    assert ledger.new_ids("a", 2) + ledger.new_ids("a", 1) == [b"r1:a:0", b"r1:a:1", b"r1:a:2"]
    assert ledger.new_ids("b", 1) == [b"r1:b:0"]
    assert message_id(b"r1:a:7 ......") == b"r1:a:7"


def test_lost_is_acknowledged_and_never_delivered_on_that_channel() -> None:
    ledger = Ledger(["t"], ["x", "y"], run="r")
    ids = ledger.new_ids("t", 3)
    ledger.acknowledged("t", ids)
    for mid in ids:
        ledger.delivered("t", "x", mid + b" pad", "n1")
    ledger.delivered("t", "y", ids[0], "n1")
    tally = ledger.tally()
    by_channel = {c.channel: c for c in tally.channels}
    assert (by_channel["x"].lost, by_channel["y"].lost) == (0, 2)
    assert tally.lost == 2 and tally.published == 3 and tally.acknowledged == 3
    assert ledger.undelivered() == 2


def test_duplicates_and_failed_publishes_that_were_delivered_anyway() -> None:
    ledger = Ledger(["t"], ["x"], run="r")
    acked, failed = ledger.new_ids("t", 1), ledger.new_ids("t", 1)
    ledger.acknowledged("t", acked)
    ledger.failed("t", failed)
    for body in (acked[0], acked[0], failed[0], b"other-run:t:0 pad"):
        ledger.delivered("t", "x", body, "n1")
    [channel] = ledger.tally().channels
    assert (channel.lost, channel.duplicates, channel.failed_but_delivered, channel.unknown) == (0, 1, 1, 1)
    assert (channel.delivered, channel.deliveries) == (2, 4)
    tally = ledger.tally()
    assert (tally.failed, tally.duplicates, tally.unknown) == (1, 1, 1)


def test_counts_and_durations_per_phase_and_node() -> None:
    ledger = Ledger(["t"], ["x"], run="r", first_phase="before", now=100.0)
    ids = ledger.new_ids("t", 4)
    ledger.acknowledged("t", ids[:2])
    ledger.delivered("t", "x", ids[0], "n1")
    ledger.begin_phase("during", now=102.0)
    ledger.acknowledged("t", ids[2:])
    for mid in ids[1:]:
        ledger.delivered("t", "x", mid, "n2")
    tally = ledger.tally(now=106.0)
    assert [(p.name, p.seconds, p.acknowledged, p.deliveries) for p in tally.phases] == [
        ("before", 2.0, 2, 1), ("during", 4.0, 2, 3)]
    assert (tally.phases[0].published_per_second, tally.phases[1].delivered_per_second) == (1.0, 0.75)
    assert tally.deliveries_by_node == {"before": {"n1": 1}, "during": {"n2": 3}}
