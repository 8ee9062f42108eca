"""--inactive-producer-timeout and --tombstone-lifetime on a real process, with short values."""
from __future__ import annotations

import time

from tests.lookupd.lookupd_process import HOST, StartLookupd, fake_nsqd, wait_until


def test_a_silent_producer_is_hidden_after_the_timeout_and_back_when_it_speaks(
        start_lookupd: StartLookupd, topic: str) -> None:
    lookupd = start_lookupd("--inactive-producer-timeout=1s")
    info = fake_nsqd(25150)
    with lookupd.peer() as peer:
        peer.identify(info)
        assert peer.command(f"REGISTER {topic}\n".encode()) == b"OK"
        last_heard = time.monotonic()
        assert lookupd.lookup_tcp_ports(topic) == {25150}

        wait_until(lambda: lookupd.lookup_tcp_ports(topic) == set(), 5, "hidden after 1s of silence")
        assert time.monotonic() - last_heard >= 1.0, "hidden before the timeout"
        assert all(n["tcp_port"] != 25150 for n in lookupd.get("/nodes").json()["producers"])
        assert lookupd.get(f"/lookup?topic={topic}").status == 200, "the topic itself stays known"

        assert peer.command(b"PING\n") == b"OK"
        assert lookupd.lookup_tcp_ports(topic) == {25150}
        wait_until(lambda: lookupd.lookup_tcp_ports(topic) == set(), 5, "hidden again")
        assert peer.command(f"REGISTER {topic} c\n".encode()) == b"OK", "any command is a sign of life"
        assert lookupd.lookup_tcp_ports(topic) == {25150}


def test_a_tombstone_lasts_its_lifetime(start_lookupd: StartLookupd, topic: str) -> None:
    lookupd = start_lookupd("--tombstone-lifetime=1s")
    info = fake_nsqd(26150)
    with lookupd.peer() as peer:
        peer.identify(info)
        assert peer.command(f"REGISTER {topic}\n".encode()) == b"OK"
        assert lookupd.post(f"/topic/tombstone?topic={topic}&node={HOST}:26151").status == 200
        tombstoned = time.monotonic()
        assert lookupd.lookup_tcp_ports(topic) == set()
        (node,) = [n for n in lookupd.get("/nodes").json()["producers"] if n["tcp_port"] == 26150]
        assert node["tombstones"] == [True]
        assert peer.command(f"REGISTER {topic} c\n".encode()) == b"OK"
        assert lookupd.lookup_tcp_ports(topic) == set(), "registering more keeps the tombstone"

        wait_until(lambda: lookupd.lookup_tcp_ports(topic) == {26150}, 5, "visible after the lifetime")
        assert time.monotonic() - tombstoned >= 1.0, "visible before the lifetime ended"
        (node,) = [n for n in lookupd.get("/nodes").json()["producers"] if n["tcp_port"] == 26150]
        assert node["tombstones"] == [False]


def test_registering_anew_after_unregistering_ends_a_tombstone(start_lookupd: StartLookupd, topic: str) -> None:
    lookupd = start_lookupd()  # 45s: only the new registration can bring it back in time
    with lookupd.peer() as peer:
        peer.identify(fake_nsqd(27150))
        peer.command(f"REGISTER {topic}\n".encode())
        assert lookupd.post(f"/topic/tombstone?topic={topic}&node={HOST}:27151").status == 200
        assert lookupd.lookup_tcp_ports(topic) == set()
        assert peer.command(f"UNREGISTER {topic}\n".encode()) == b"OK"
        assert peer.command(f"REGISTER {topic}\n".encode()) == b"OK"
        assert lookupd.lookup_tcp_ports(topic) == {27150}
