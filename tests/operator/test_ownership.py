"""Which declaration of an NSQ name is applied: the oldest, then the first by name."""
from __future__ import annotations

from nsq_operator.topology.ownership import winner, winners
from nsq_operator.topology.wishes import ChannelWish, TopicWish


def topic(owner: str, created: str, name: str = "orders", paused: bool = False) -> TopicWish:
    return TopicWish("demo", "ns", name, paused, owner, created)


def test_the_oldest_then_the_first_by_name_wins() -> None:
    old, young, twin = topic("b", "2026-01-01T00:00:00Z"), topic("a", "2026-01-02T00:00:00Z"), topic("c", "2026-01-01T00:00:00Z")
    assert winner(young, [old, twin]) == old and winner(old, [young]) == old and winner(twin, [old]) == old
    other = topic("z", "2026-01-03T00:00:00Z", name="clicks")
    assert sorted(w.owner for w in winners([young, old, twin, other])) == ["b", "z"]


def test_a_channel_is_named_by_its_topic_and_channel() -> None:
    a = ChannelWish("demo", "ns", "orders", "billing", False, "a", "2026-01-01T00:00:00Z")
    b = ChannelWish("demo", "ns", "clicks", "billing", True, "b", "2025-01-01T00:00:00Z")
    assert winner(a, [b]) == a and len(winners([a, b])) == 2
