"""--inactive-producer-timeout and --tombstone-lifetime on a real process, with short values."""
from __future__ import annotations

import time

from tests.lookupd.conftest import StartLookupd
from tests.lookupd.v1_peer import V1Peer, fake_nsqd
from tests.servers import HOST, wait_for


def test_a_silent_producer_is_hidden_after_the_timeout_and_back_when_it_speaks(
        start_lookupd: StartLookupd, topic: str) -> None:
    lookupd = start_lookupd(inactive_producer_timeout="1s")
    info = fake_nsqd(25150)
    with V1Peer.to(lookupd) as peer:
        peer.identify(info)
        assert peer.command(f"REGISTER {topic}\n".encode()) == b"OK"
        last_heard = time.monotonic()
        assert lookupd.producer_tcp_ports(topic) == {25150}

        wait_for(lambda: lookupd.producer_tcp_ports(topic) == set(), 5, message="hidden after 1s of silence")
        assert time.monotonic() - last_heard >= 1.0, "hidden before the timeout"
        assert all(n["tcp_port"] != 25150 for n in lookupd.get("/nodes").json()["producers"])
        assert lookupd.get(f"/lookup?topic={topic}").status == 200, "the topic itself stays known"

        assert peer.command(b"PING\n") == b"OK"
        assert lookupd.producer_tcp_ports(topic) == {25150}
        wait_for(lambda: lookupd.producer_tcp_ports(topic) == set(), 5, message="hidden again")
        assert peer.command(f"REGISTER {topic} c\n".encode()) == b"OK", "any command is a sign of life"
        assert lookupd.producer_tcp_ports(topic) == {25150}


def test_a_tombstone_lasts_its_lifetime(start_lookupd: StartLookupd, topic: str) -> None:
    lookupd = start_lookupd(tombstone_lifetime="1s")
    info = fake_nsqd(26150)
    with V1Peer.to(lookupd) as peer:
        peer.identify(info)
        assert peer.command(f"REGISTER {topic}\n".encode()) == b"OK"
        tombstoned = time.monotonic()  # before the call: lookupd stamps it while answering
        assert lookupd.post(f"/topic/tombstone?topic={topic}&node={HOST}:26151").status == 200
        assert lookupd.producer_tcp_ports(topic) == set()
        (node,) = [n for n in lookupd.get("/nodes").json()["producers"] if n["tcp_port"] == 26150]
        assert node["tombstones"] == [True]
        assert peer.command(f"REGISTER {topic} c\n".encode()) == b"OK"
        assert lookupd.producer_tcp_ports(topic) == set(), "registering more keeps the tombstone"

        wait_for(lambda: lookupd.producer_tcp_ports(topic) == {26150}, 5, message="visible after the lifetime")
        assert time.monotonic() - tombstoned >= 1.0, "visible before the lifetime ended"
        (node,) = [n for n in lookupd.get("/nodes").json()["producers"] if n["tcp_port"] == 26150]
        assert node["tombstones"] == [False]


def test_registering_anew_after_unregistering_ends_a_tombstone(start_lookupd: StartLookupd, topic: str) -> None:
    lookupd = start_lookupd()  # 45s: only the new registration can bring it back in time
    with V1Peer.to(lookupd) as peer:
        peer.identify(fake_nsqd(27150))
        peer.command(f"REGISTER {topic}\n".encode())
        assert lookupd.post(f"/topic/tombstone?topic={topic}&node={HOST}:27151").status == 200
        assert lookupd.producer_tcp_ports(topic) == set()
        assert peer.command(f"UNREGISTER {topic}\n".encode()) == b"OK"
        assert peer.command(f"REGISTER {topic}\n".encode()) == b"OK"
        assert lookupd.producer_tcp_ports(topic) == {27150}
