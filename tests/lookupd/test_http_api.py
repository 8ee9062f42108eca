"""lookupd's HTTP API against a real nsqlookupd process: routes, JSON shapes, codes, headers."""
from __future__ import annotations

import socket

import pytest

from tests.lookupd.v1_peer import V1Peer, fake_nsqd
from tests.servers import HOST, Nsqlookupd, request

NSQ_ACCEPT = {"Accept": "application/vnd.nsq; version=1.0"}


@pytest.fixture
def registered(lookupd: Nsqlookupd, topic: str):  # type: ignore[no-untyped-def]
    """A fake nsqd (tcp_port 24150) that produces ``topic`` with channel ``ch``, and ``<topic>-other``."""
    peer = V1Peer.to(lookupd)
    info = fake_nsqd(24150 + hash(topic) % 1000)
    peer.identify(info)
    assert peer.command(f"REGISTER {topic} ch\n".encode()) == b"OK"
    assert peer.command(f"REGISTER {topic}-other\n".encode()) == b"OK"
    yield peer, info
    peer.close()


def test_ping_is_plain_text_ok(lookupd: Nsqlookupd) -> None:
    r = lookupd.get("/ping")
    assert (r.status, r.body) == (200, b"OK")
    assert r.headers["Content-Type"] == "text/plain; charset=utf-8"


def test_info_is_the_version(lookupd: Nsqlookupd) -> None:
    r = lookupd.get("/info")
    assert r.status == 200 and r.json() == {"version": "1.3.0"}
    assert r.headers["Content-Type"] == "application/json; charset=utf-8"
    assert r.headers["X-NSQ-Content-Type"] == "nsq; version=1.0"


@pytest.mark.parametrize("method,path,status,code", [
    ("GET", "/nope", 404, "NOT_FOUND"),
    ("GET", "/lookup/extra", 404, "NOT_FOUND"),
    ("POST", "/lookup?topic=t", 405, "METHOD_NOT_ALLOWED"),
    ("GET", "/topic/create?topic=t", 405, "METHOD_NOT_ALLOWED"),
    ("PUT", "/ping", 405, "METHOD_NOT_ALLOWED"),
    ("GET", "/lookup", 400, "MISSING_ARG_TOPIC"),
    ("GET", "/channels", 400, "MISSING_ARG_TOPIC"),
    ("GET", "/lookup?topic=never-registered", 404, "TOPIC_NOT_FOUND"),
    ("GET", "/lookup?topic=%zz", 400, "INVALID_REQUEST"),
    ("GET", "/lookup?topic=a;b", 400, "INVALID_REQUEST"),
    ("POST", "/topic/create", 400, "MISSING_ARG_TOPIC"),
    ("POST", "/topic/create?topic=bad$name", 400, "INVALID_ARG_TOPIC"),
    ("POST", "/topic/delete", 400, "MISSING_ARG_TOPIC"),
    ("POST", "/channel/create?channel=c", 400, "MISSING_ARG_TOPIC"),
    ("POST", "/channel/create?topic=bad$", 400, "INVALID_ARG_TOPIC"),
    ("POST", "/channel/create?topic=t", 400, "MISSING_ARG_CHANNEL"),
    ("POST", "/channel/create?topic=t&channel=bad$", 400, "INVALID_ARG_CHANNEL"),
    ("POST", "/channel/delete?topic=t&channel=nope", 404, "CHANNEL_NOT_FOUND"),
    ("POST", "/topic/tombstone?node=1.2.3.4:1", 400, "MISSING_ARG_TOPIC"),
    ("POST", "/topic/tombstone?topic=t", 400, "MISSING_ARG_NODE"),
])
def test_errors_are_json_messages_with_nsqs_codes(lookupd: Nsqlookupd, method: str, path: str,
                                                  status: int, code: str) -> None:
    r = request(method, lookupd.url(path))
    assert (r.status, r.json()) == (status, {"message": code})
    assert r.headers["Content-Type"] == "application/json; charset=utf-8"


def test_lookup_shape_and_the_nsq_accept_header_gets_the_same_json(
        lookupd: Nsqlookupd, topic: str, registered) -> None:  # type: ignore[no-untyped-def]
    peer, info = registered
    plain = lookupd.get(f"/lookup?topic={topic}")
    negotiated = lookupd.get(f"/lookup?topic={topic}", headers=NSQ_ACCEPT)
    assert plain.status == negotiated.status == 200
    assert plain.body == negotiated.body
    local = peer.sock.getsockname()
    assert plain.json() == {"channels": ["ch"], "producers": [{
        "remote_address": f"{local[0]}:{local[1]}", "hostname": "fake-nsqd", "broadcast_address": HOST,
        "tcp_port": info["tcp_port"], "http_port": info["http_port"], "version": "1.3.0"}]}


def test_topics_and_channels(lookupd: Nsqlookupd, topic: str, registered) -> None:  # type: ignore[no-untyped-def]
    topics = lookupd.get("/topics").json()["topics"]
    assert {topic, f"{topic}-other"} <= set(topics)
    assert lookupd.get(f"/channels?topic={topic}").json() == {"channels": ["ch"]}
    assert lookupd.get("/channels?topic=never-heard-of").json() == {"channels": []}


def test_nodes_lists_each_peer_with_topics_and_tombstones(
        lookupd: Nsqlookupd, topic: str, registered) -> None:  # type: ignore[no-untyped-def]
    peer, info = registered
    node_name = f"{HOST}:{info['http_port']}"
    assert lookupd.post(f"/topic/tombstone?topic={topic}&node={node_name}").status == 200
    node = next(n for n in lookupd.get("/nodes").json()["producers"] if n["tcp_port"] == info["tcp_port"])
    local = peer.sock.getsockname()
    assert node == {"remote_address": f"{local[0]}:{local[1]}", "hostname": "fake-nsqd",
                    "broadcast_address": HOST, "tcp_port": info["tcp_port"], "http_port": info["http_port"],
                    "version": "1.3.0", "tombstones": [True, False], "topics": [topic, f"{topic}-other"]}


def test_tombstone_hides_the_node_for_that_topic_only(
        lookupd: Nsqlookupd, topic: str, registered) -> None:  # type: ignore[no-untyped-def]
    _, info = registered
    other_peer = V1Peer.to(lookupd)
    other = fake_nsqd(info["tcp_port"] + 2000)
    other_peer.identify(other)
    other_peer.command(f"REGISTER {topic}\n".encode())
    with other_peer:
        r = lookupd.post(f"/topic/tombstone?topic={topic}&node={HOST}:{info['http_port']}")
        assert (r.status, r.body) == (200, b"")
        assert lookupd.producer_tcp_ports(topic) == {other["tcp_port"]}
        assert lookupd.producer_tcp_ports(f"{topic}-other") == {info["tcp_port"]}
        assert lookupd.post(f"/topic/tombstone?topic={topic}&node=10.9.9.9:1").status == 200


def test_topic_create_and_delete(lookupd: Nsqlookupd, topic: str) -> None:
    r = lookupd.post(f"/topic/create?topic={topic}")
    assert (r.status, r.body) == (200, b"")
    assert topic in lookupd.get("/topics").json()["topics"]
    assert lookupd.get(f"/lookup?topic={topic}").json() == {"channels": [], "producers": []}
    assert lookupd.post(f"/topic/delete?topic={topic}").status == 200
    assert topic not in lookupd.get("/topics").json()["topics"]
    assert lookupd.get(f"/lookup?topic={topic}").status == 404


def test_channel_create_implies_the_topic_and_topic_delete_takes_its_channels(
        lookupd: Nsqlookupd, topic: str) -> None:
    assert lookupd.post(f"/channel/create?topic={topic}&channel=b").status == 200
    assert lookupd.post(f"/channel/create?topic={topic}&channel=a").status == 200
    assert lookupd.get(f"/lookup?topic={topic}").json() == {"channels": ["a", "b"], "producers": []}
    assert lookupd.post(f"/channel/delete?topic={topic}&channel=a").status == 200
    assert lookupd.get(f"/channels?topic={topic}").json() == {"channels": ["b"]}
    assert lookupd.post(f"/topic/delete?topic={topic}").status == 200
    assert lookupd.get(f"/channels?topic={topic}").json() == {"channels": []}


def test_query_values_are_unescaped_like_go(lookupd: Nsqlookupd, topic: str) -> None:
    escaped = topic.replace("-", "%2D")
    assert lookupd.post(f"/topic/create?topic={escaped}").status == 200
    assert topic in lookupd.get("/topics").json()["topics"]


def test_options_lists_the_allowed_methods(lookupd: Nsqlookupd) -> None:
    r = request("OPTIONS", lookupd.url("/topic/create"))
    assert r.status == 200 and r.headers["Allow"] == "OPTIONS, POST"


def test_debug_dumps_registrations(lookupd: Nsqlookupd, topic: str, registered) -> None:  # type: ignore[no-untyped-def]
    _, info = registered
    dump = lookupd.get("/debug").json()
    (entry,) = dump[f"channel:{topic}:ch"]
    assert entry["tcp_port"] == info["tcp_port"] and entry["tombstoned"] is False
    assert any(e["tcp_port"] == info["tcp_port"] for e in dump["client::"])


@pytest.mark.parametrize("garbage", [b"GARBAGE\r\n\r\n", b"\x00\x01\x02\xff\r\n\r\n", b"  V1PING\n\r\n\r\n"])
def test_bytes_that_are_not_http_get_a_400(lookupd: Nsqlookupd, garbage: bytes) -> None:
    with V1Peer(HOST, lookupd.http_port, magic=b"") as conn:
        conn.send(garbage)
        conn.sock.settimeout(5)
        head = conn.sock.recv(64)
    assert head.startswith(b"HTTP/1.") and head.split(b" ")[1] == b"400", head
    assert lookupd.get("/ping").body == b"OK"


def test_keep_alive_connections_serve_many_requests(lookupd: Nsqlookupd) -> None:
    with socket.create_connection((HOST, lookupd.http_port), timeout=5) as s:
        s.sendall(b"GET /ping HTTP/1.1\r\nHost: x\r\n\r\n" * 3)
        data = b""
        while data.count(b"\r\n\r\nOK") < 3:
            chunk = s.recv(4096)
            assert chunk, data
            data += chunk
    assert data.count(b"HTTP/1.1 200 OK") == 3
