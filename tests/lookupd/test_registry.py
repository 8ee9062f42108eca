"""The registry on its own: registrations, what disconnects and HTTP deletes leave behind,
and the two clocks (inactivity, tombstones) with time passed in."""
from __future__ import annotations

from nsqlookupd.registry import PeerInfo, Registry


def peer(n: int) -> PeerInfo:
    return PeerInfo(id=f"10.0.0.{n}:5000{n}", remote_address=f"10.0.0.{n}:5000{n}", hostname=f"h{n}",
                    broadcast_address=f"10.0.0.{n}", tcp_port=4150 + n, http_port=4160 + n, version="1.3.0")


def with_peers(*ns: int, inactive: float = 300.0, tombstone: float = 45.0) -> Registry:
    reg = Registry(inactive_producer_timeout=inactive, tombstone_lifetime=tombstone)
    for n in ns:
        reg.add_peer(peer(n), now=0.0)
    return reg


def producer_ports(reg: Registry, topic: str, now: float = 0.0) -> list[int]:
    found = reg.lookup(topic, now)
    assert found is not None, f"{topic} unknown"
    return [p.tcp_port for p in found.producers]


def test_register_channel_registers_its_topic_too() -> None:
    reg = with_peers(1)
    assert reg.register(peer(1).id, "t", "c") == [("t", "c"), ("t", None)]
    assert reg.register(peer(1).id, "t", "c") == [], "registering twice changes nothing"
    assert reg.topics() == ["t"] and reg.channels("t") == ["c"]
    assert producer_ports(reg, "t") == [4151]


def test_unknown_topic_is_none_and_a_created_one_has_no_producers() -> None:
    reg = with_peers()
    assert reg.lookup("t", 0.0) is None
    reg.create_topic("t")
    assert producer_ports(reg, "t") == []


def test_unregister_topic_takes_the_peers_channels_with_it() -> None:
    reg = with_peers(1, 2)
    reg.register(peer(1).id, "t", "c")
    reg.register(peer(2).id, "t", "c")
    assert reg.unregister(peer(1).id, "t") == [("t", "c"), ("t", None)]
    assert producer_ports(reg, "t") == [4152]
    assert reg.channels("t") == ["c"], "names stay known"


def test_ephemeral_names_go_when_their_last_producer_unregisters_them() -> None:
    reg = with_peers(1, 2)
    reg.register(peer(1).id, "t", "tmp#ephemeral")
    reg.register(peer(2).id, "t", "tmp#ephemeral")
    reg.register(peer(1).id, "e#ephemeral")
    reg.unregister(peer(1).id, "t", "tmp#ephemeral")
    assert reg.channels("t") == ["tmp#ephemeral"], "another producer still has it"
    reg.unregister(peer(2).id, "t", "tmp#ephemeral")
    assert reg.channels("t") == []
    reg.unregister(peer(1).id, "e#ephemeral")
    assert reg.lookup("e#ephemeral", 0.0) is None


def test_ephemeral_names_stay_known_when_producers_leave_otherwise() -> None:
    # as Go's lookupd: a disconnect, or UNREGISTER of the topic (for its channels), only
    # removes the producer; the name stays known with none
    reg = with_peers(1, 2)
    reg.register(peer(1).id, "e#ephemeral")
    reg.register(peer(2).id, "t", "tmp#ephemeral")
    reg.remove_peer(peer(1).id)
    found = reg.lookup("e#ephemeral", 0.0)
    assert found is not None and found.producers == []
    reg.unregister(peer(2).id, "t")
    assert reg.channels("t") == ["tmp#ephemeral"]


def test_disconnect_drops_every_registration_of_the_peer_only() -> None:
    reg = with_peers(1, 2)
    reg.register(peer(1).id, "t", "c")
    reg.register(peer(1).id, "t", "tmp#ephemeral")
    reg.register(peer(2).id, "t")
    removed = reg.remove_peer(peer(1).id)
    assert sorted(removed, key=str) == sorted([("t", "c"), ("t", "tmp#ephemeral"), ("t", None)], key=str)
    assert producer_ports(reg, "t") == [4152]
    assert reg.channels("t") == ["c", "tmp#ephemeral"]
    assert [n.info.id for n in reg.nodes(0.0)] == [peer(2).id]
    assert reg.remove_peer(peer(1).id) == []


def test_http_delete_topic_forgets_it_and_its_channels() -> None:
    reg = with_peers(1)
    reg.register(peer(1).id, "t", "c")
    reg.delete_topic("t")
    assert reg.lookup("t", 0.0) is None and reg.channels("t") == [] and reg.topics() == []
    reg.unregister(peer(1).id, "t")  # a late UNREGISTER is harmless


def test_http_channels() -> None:
    reg = with_peers()
    reg.create_channel("t", "b")
    reg.create_channel("t", "a")
    assert reg.topics() == ["t"] and reg.channels("t") == ["a", "b"]
    assert reg.delete_channel("t", "a") is True
    assert reg.delete_channel("t", "a") is False
    assert reg.delete_channel("nope", "a") is False


def test_inactive_peer_is_hidden_until_heard_from_again() -> None:
    reg = with_peers(1, inactive=10.0)
    reg.register(peer(1).id, "t")
    assert producer_ports(reg, "t", now=10.0) == [4151], "exactly the timeout is still active"
    assert producer_ports(reg, "t", now=10.5) == []
    assert reg.nodes(10.5) == []
    reg.touch_peer(peer(1).id, now=11.0)
    assert producer_ports(reg, "t", now=20.0) == [4151]


def test_tombstone_hides_one_node_for_one_topic_for_its_lifetime() -> None:
    reg = with_peers(1, 2, tombstone=5.0)
    for n in (1, 2):
        reg.register(peer(n).id, "t")
        reg.register(peer(n).id, "other")
    assert reg.tombstone("t", "10.0.0.1:4161", now=1.0) == 1
    assert reg.tombstone("t", "10.0.0.9:4169", now=1.0) == 0
    assert producer_ports(reg, "t", now=1.0) == [4152]
    assert producer_ports(reg, "other", now=1.0) == [4151, 4152]
    node = next(n for n in reg.nodes(1.0) if n.info.id == peer(1).id)
    assert dict(zip(node.topics, node.tombstones)) == {"other": False, "t": True}
    assert producer_ports(reg, "t", now=5.9) == [4152]
    assert producer_ports(reg, "t", now=6.0) == [4151, 4152]


def test_tombstone_survives_a_repeated_register_but_not_a_fresh_one() -> None:
    reg = with_peers(1, tombstone=45.0)
    reg.register(peer(1).id, "t")
    reg.tombstone("t", "10.0.0.1:4161", now=0.0)
    reg.register(peer(1).id, "t", "c")  # still the same registration
    assert producer_ports(reg, "t", now=1.0) == []
    reg.unregister(peer(1).id, "t")
    reg.register(peer(1).id, "t")
    assert producer_ports(reg, "t", now=1.0) == [4151]


def test_debug_entries_cover_clients_topics_and_channels() -> None:
    reg = with_peers(1)
    reg.register(peer(1).id, "t", "c")
    keys = {e.registration for e in reg.debug_entries()}
    assert keys == {("client", "", ""), ("topic", "t", ""), ("channel", "t", "c")}
