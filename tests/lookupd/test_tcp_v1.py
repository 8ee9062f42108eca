"""lookupd's V1 TCP protocol against a real nsqlookupd process, byte by byte."""
from __future__ import annotations

import json
import os
import random
import socket
import struct

import pytest

from tests.lookupd.v1_peer import V1Peer, fake_nsqd
from tests.servers import HOST, Nsqlookupd, wait_for


def identified(lookupd: Nsqlookupd, tcp_port: int | None = None) -> tuple[V1Peer, dict]:
    info = fake_nsqd(tcp_port or random.randint(20000, 40000))
    peer = V1Peer.to(lookupd)
    answer = peer.identify(info)
    assert not answer.startswith(b"E_"), answer
    return peer, info


def test_identify_is_answered_with_lookupds_own_info(lookupd: Nsqlookupd) -> None:
    with V1Peer.to(lookupd) as peer:
        body = json.dumps(fake_nsqd(4150)).encode()
        peer.send(b"IDENTIFY\n" + struct.pack(">I", len(body)) + body)
        (size,) = struct.unpack(">I", peer.read_exact(4))
        info = json.loads(peer.read_exact(size))
    assert info == {"broadcast_address": HOST, "hostname": socket.gethostname(),
                    "http_port": lookupd.http_port, "tcp_port": lookupd.tcp_port, "version": "1.3.0"}


def test_ping_is_ok_before_and_after_identify(lookupd: Nsqlookupd) -> None:
    with V1Peer.to(lookupd) as peer:
        peer.send(b"PING\n")
        assert peer.read_exact(6) == b"\x00\x00\x00\x02OK"
        peer.identify(fake_nsqd(4150))
        assert peer.command(b"PING\n") == b"OK"


def test_bad_magic_is_answered_e_bad_protocol_then_closed(lookupd: Nsqlookupd) -> None:
    with V1Peer.to(lookupd, magic=b"  V2") as peer:
        assert peer.read_exact(18) == b"\x00\x00\x00\x0eE_BAD_PROTOCOL"
        assert peer.is_closed_by_server()


@pytest.mark.parametrize("line,answer", [
    (b"BOGUS\n", b"E_INVALID invalid command BOGUS"),
    (b"REGISTER t\n", b"E_INVALID client must IDENTIFY"),
    (b"UNREGISTER t c\n", b"E_INVALID client must IDENTIFY"),
])
def test_errors_before_identify_close_the_connection(lookupd: Nsqlookupd, line: bytes, answer: bytes) -> None:
    with V1Peer.to(lookupd) as peer:
        assert peer.command(line) == answer
        assert peer.is_closed_by_server()


@pytest.mark.parametrize("line,code", [
    (b"REGISTER\n", b"E_INVALID"),
    (b"REGISTER bad$name\n", b"E_BAD_TOPIC"),
    (b"REGISTER good bad$name\n", b"E_BAD_CHANNEL"),
    (b"UNREGISTER bad$name\n", b"E_BAD_TOPIC"),
    (b"NOPE\n", b"E_INVALID"),
])
def test_errors_after_identify_close_the_connection(lookupd: Nsqlookupd, line: bytes, code: bytes) -> None:
    peer, _ = identified(lookupd)
    with peer:
        assert peer.command(line).startswith(code + b" ")
        assert peer.is_closed_by_server()


@pytest.mark.parametrize("body", [{"broadcast_address": HOST}, {**fake_nsqd(1), "tcp_port": "1"}, "not json"])
def test_bad_identify_is_e_bad_body_and_closes(lookupd: Nsqlookupd, body: object) -> None:
    raw = body.encode() if isinstance(body, str) else json.dumps(body).encode()
    with V1Peer.to(lookupd) as peer:
        assert peer.command(b"IDENTIFY\n" + struct.pack(">I", len(raw)) + raw).startswith(b"E_BAD_BODY ")
        assert peer.is_closed_by_server()


def test_identify_twice_is_refused_without_reading_a_body(lookupd: Nsqlookupd) -> None:
    peer, _ = identified(lookupd)
    with peer:
        assert peer.command(b"IDENTIFY\n") == b"E_INVALID cannot IDENTIFY again"
        assert peer.is_closed_by_server()


def test_register_and_unregister_show_in_lookup(lookupd: Nsqlookupd, topic: str) -> None:
    peer, info = identified(lookupd)
    with peer:
        assert peer.command(f"REGISTER {topic} ch\n".encode()) == b"OK"
        answer = lookupd.get(f"/lookup?topic={topic}").json()
        assert answer["channels"] == ["ch"]
        (producer,) = answer["producers"]
        local = peer.sock.getsockname()
        assert producer == {"remote_address": f"{local[0]}:{local[1]}", "hostname": "fake-nsqd",
                            "broadcast_address": HOST, "tcp_port": info["tcp_port"],
                            "http_port": info["http_port"], "version": "1.3.0"}

        assert peer.command(f"UNREGISTER {topic} ch\n".encode()) == b"OK"
        assert lookupd.producer_tcp_ports(topic) == {info["tcp_port"]}
        assert lookupd.get(f"/channels?topic={topic}").json() == {"channels": ["ch"]}, "a name stays known"
        assert peer.command(f"UNREGISTER {topic}\n".encode()) == b"OK"
        assert lookupd.get(f"/lookup?topic={topic}").json() == {"channels": ["ch"], "producers": []}


def test_unregister_of_a_topic_takes_this_peers_channels(lookupd: Nsqlookupd, topic: str) -> None:
    peer, info = identified(lookupd)
    with peer:
        peer.command(f"REGISTER {topic} a\n".encode())
        peer.command(f"REGISTER {topic} b#ephemeral\n".encode())
        assert peer.command(f"UNREGISTER {topic}\n".encode()) == b"OK"
        # names stay known, the ephemeral one too (only its own UNREGISTER drops it, as in Go)
        assert lookupd.get(f"/channels?topic={topic}").json() == {"channels": ["a", "b#ephemeral"]}
        assert lookupd.producer_tcp_ports(topic) == set()


def test_two_peers_share_a_topic_and_disconnect_drops_only_ones_own(lookupd: Nsqlookupd, topic: str) -> None:
    a, info_a = identified(lookupd)
    b, info_b = identified(lookupd)
    with a, b:
        assert a.command(f"REGISTER {topic} x#ephemeral\n".encode()) == b"OK"
        assert b.command(f"REGISTER {topic}\n".encode()) == b"OK"
        assert lookupd.producer_tcp_ports(topic) == {info_a["tcp_port"], info_b["tcp_port"]}
        a.close()
        wait_for(lambda: lookupd.producer_tcp_ports(topic) == {info_b["tcp_port"]}, 5,
                 message="the closed peer's registration is dropped")
        assert lookupd.get(f"/channels?topic={topic}").json() == {"channels": ["x#ephemeral"]}, \
            "a disconnect removes the producer, not the name (Go's lookupd does the same)"
        nodes = lookupd.get("/nodes").json()["producers"]
        assert info_a["tcp_port"] not in {n["tcp_port"] for n in nodes}


def test_commands_split_into_single_bytes_and_pipelined(lookupd: Nsqlookupd, topic: str) -> None:
    body = json.dumps(fake_nsqd(31000)).encode()
    stream = (b"IDENTIFY\n" + struct.pack(">I", len(body)) + body + f"REGISTER {topic} c\n".encode()
              + b"PING\n" + f"UNREGISTER {topic} c\n".encode())
    with V1Peer.to(lookupd) as peer:
        for i in range(len(stream)):
            peer.send(stream[i:i + 1])
        assert json.loads(peer.read_answer())["tcp_port"] == lookupd.tcp_port
        assert [peer.read_answer() for _ in range(3)] == [b"OK", b"OK", b"OK"]


def test_garbage_on_the_tcp_port_does_not_disturb_well_behaved_peers(lookupd: Nsqlookupd, topic: str) -> None:
    rng = random.Random(1234)
    good, info = identified(lookupd)
    with good:
        assert good.command(f"REGISTER {topic}\n".encode()) == b"OK"
        for n in range(30):
            junk = rng.randbytes(rng.randint(1, 2000))
            magic = b"  V1" if n % 2 else b""
            with V1Peer(HOST, lookupd.tcp_port, magic=magic) as bad:
                bad.send(junk)
                bad.sock.shutdown(socket.SHUT_WR)
                assert bad.is_closed_by_server(timeout=5)
        with V1Peer(HOST, lookupd.tcp_port) as long_line:
            long_line.send(b"REGISTER " + b"a" * (200 * 1024))
            assert long_line.read_answer().startswith(b"E_INVALID")
        assert good.command(b"PING\n") == b"OK"
        assert lookupd.producer_tcp_ports(topic) == {info["tcp_port"]}
    assert lookupd.proc is not None and lookupd.proc.poll() is None, "lookupd is still running"


def test_a_peer_that_hangs_up_mid_identify_leaves_nothing(lookupd: Nsqlookupd) -> None:
    before = len(lookupd.get("/nodes").json()["producers"])
    with V1Peer.to(lookupd) as peer:
        peer.send(b"IDENTIFY\n" + struct.pack(">I", 100) + os.urandom(10))
    assert len(lookupd.get("/nodes").json()["producers"]) == before
    with V1Peer.to(lookupd) as peer:
        assert peer.command(b"PING\n") == b"OK"
