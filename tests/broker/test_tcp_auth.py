"""AUTH against a real nsqd and a small auth server: what nsqd asks, what the answer
permits, and re-asking once the answer's TTL runs out."""
from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Iterator
from urllib.parse import parse_qs, urlparse

import pytest

from tests.broker.conftest import Connect
from tests.broker.wire import Closed, Silent
from tests.conftest import Servers
from tests.servers import HOST, Nsqd, free_port


class AuthServer(ThreadingHTTPServer):
    """Answers GET /auth from ``grants`` (secret -> JSON answer); 403 for other secrets."""

    def __init__(self) -> None:
        super().__init__((HOST, free_port()), _AuthHandler)
        self.grants: dict[str, dict[str, Any]] = {}
        self.queries: list[dict[str, list[str]]] = []
        self.lock = threading.Lock()

    @property
    def address(self) -> str:
        return f"{HOST}:{self.server_address[1]}"

    def asked_for(self, secret: str) -> int:
        with self.lock:
            return sum(1 for q in self.queries if q.get("secret") == [secret])


class _AuthHandler(BaseHTTPRequestHandler):
    server: AuthServer

    def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
        url = urlparse(self.path)
        query = parse_qs(url.query)
        with self.server.lock:
            self.server.queries.append(query)
            grant = self.server.grants.get(query.get("secret", [""])[0])
        if url.path == "/auth" and grant is not None:
            status, body = 200, json.dumps(grant).encode()
        else:
            status, body = 403, b'{"message": "NOT_AUTHORIZED"}'
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


def grant(topic: str, channels: list[str], permissions: list[str], ttl: int = 3600,
          identity: str = "tester") -> dict[str, Any]:
    return {"ttl": ttl, "identity": identity, "identity_url": "http://example.invalid/" + identity,
            "authorizations": [{"topic": topic, "channels": channels, "permissions": permissions}]}


@pytest.fixture(scope="module")
def auth_server() -> Iterator[AuthServer]:
    server = AuthServer()
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()
    thread.join(5)


@pytest.fixture(scope="module")
def auth_nsqd(module_servers: Servers, auth_server: AuthServer) -> Nsqd:
    return module_servers.nsqd(auth_http_address=auth_server.address)


def test_auth_answer_and_what_nsqd_asks(auth_nsqd: Nsqd, auth_server: AuthServer,
                                        connect: Connect, topic: str) -> None:
    auth_server.grants["s-answer"] = grant(f"^{topic}$", [".*"], ["publish", "subscribe"],
                                           identity="alice")
    conn = connect(auth_nsqd)
    conn.auth("s-answer")
    assert conn.read_json() == {"identity": "alice", "identity_url": "http://example.invalid/alice",
                                "permission_count": 1}
    query = next(q for q in auth_server.queries if q.get("secret") == ["s-answer"])
    assert query["remote_ip"] == ["127.0.0.1"]
    assert query["tls"] == ["false"]
    conn.pub(topic, b"allowed")
    conn.expect_ok()
    conn.sub(topic, "ch")
    conn.expect_ok()
    (client,) = auth_nsqd.channel(topic, "ch")["clients"]  # type: ignore[index]
    assert client["authed"] is True and client["auth_identity"] == "alice"
    assert client["auth_identity_url"] == "http://example.invalid/alice"


def test_subscribe_only_grant_limits_channels_and_refuses_publishing(
        auth_nsqd: Nsqd, auth_server: AuthServer, connect: Connect, topic: str) -> None:
    auth_server.grants["s-sub"] = grant(f"^{topic}$", ["^allowed$"], ["subscribe"])
    ok = connect(auth_nsqd)
    ok.auth("s-sub")
    ok.read_json()
    ok.sub(topic, "allowed")
    ok.expect_ok()

    other_channel = connect(auth_nsqd)
    other_channel.auth("s-sub")
    other_channel.read_json()
    other_channel.sub(topic, "elsewhere")
    other_channel.expect_fatal("E_UNAUTHORIZED")

    publisher = connect(auth_nsqd)
    publisher.auth("s-sub")
    publisher.read_json()
    publisher.pub(topic, b"no")
    publisher.expect_fatal("E_UNAUTHORIZED")


def test_mpub_and_dpub_need_authorization_too(auth_nsqd: Nsqd, auth_server: AuthServer,
                                              connect: Connect, topic: str) -> None:
    for send in (lambda c: c.mpub(topic, [b"a"]), lambda c: c.dpub(topic, 10, b"a")):
        conn = connect(auth_nsqd)
        send(conn)
        conn.expect_fatal("E_AUTH_FIRST")
    auth_server.grants["s-pub"] = grant(f"^{topic}$", [".*"], ["publish"])
    conn = connect(auth_nsqd)
    conn.auth("s-pub")
    conn.read_json()
    conn.mpub(topic, [b"a", b"b"])
    conn.expect_ok()
    conn.dpub(topic, 10, b"c")
    conn.expect_ok()


def test_sub_before_auth_is_e_auth_first(auth_nsqd: Nsqd, connect: Connect, topic: str) -> None:
    conn = connect(auth_nsqd)
    conn.sub(topic, "ch")
    conn.expect_fatal("E_AUTH_FIRST")


def test_auth_twice_is_fatal(auth_nsqd: Nsqd, auth_server: AuthServer, connect: Connect,
                             topic: str) -> None:
    auth_server.grants["s-twice"] = grant(f"^{topic}$", [".*"], ["publish"])
    conn = connect(auth_nsqd)
    conn.auth("s-twice")
    conn.read_json()
    conn.auth("s-twice")
    conn.expect_fatal("E_INVALID")


def test_auth_after_sub_is_fatal(auth_nsqd: Nsqd, auth_server: AuthServer, connect: Connect,
                                 topic: str) -> None:
    auth_server.grants["s-late"] = grant(f"^{topic}$", [".*"], ["subscribe"])
    conn = connect(auth_nsqd)
    conn.auth("s-late")
    conn.read_json()
    conn.sub(topic, "ch")
    conn.expect_ok()
    conn.auth("s-late")
    conn.expect_fatal("E_INVALID")


def test_grant_without_authorizations_is_e_unauthorized(auth_nsqd: Nsqd, auth_server: AuthServer,
                                                        connect: Connect) -> None:
    auth_server.grants["s-empty"] = {"ttl": 60, "identity": "nobody", "authorizations": []}
    conn = connect(auth_nsqd)
    conn.auth("s-empty")
    conn.expect_fatal("E_UNAUTHORIZED")


def test_expired_grant_is_asked_again_and_a_revoked_one_ends_the_connection(
        auth_nsqd: Nsqd, auth_server: AuthServer, connect: Connect, topic: str) -> None:
    auth_server.grants["s-ttl"] = grant(f"^{topic}$", [".*"], ["publish"], ttl=1)
    conn = connect(auth_nsqd)
    conn.auth("s-ttl")
    conn.read_json()
    conn.pub(topic, b"first")
    conn.expect_ok()
    assert auth_server.asked_for("s-ttl") == 1

    # within the TTL, publishing does not ask again; after it, the next PUB does
    deadline = time.monotonic() + 5
    while auth_server.asked_for("s-ttl") < 2 and time.monotonic() < deadline:
        conn.pub(topic, b"again")
        conn.expect_ok()
        conn.expect_silence(0.1)  # paces the publisher while the TTL runs out
    assert auth_server.asked_for("s-ttl") == 2

    del auth_server.grants["s-ttl"]
    error = None
    while error is None and time.monotonic() < deadline + 3:
        conn.pub(topic, b"after revocation")
        try:
            frame = conn.next_frame(timeout=0.3)
        except (Silent, Closed):
            continue
        if frame.is_error:
            error = frame.error_code
    assert error == "E_AUTH_FAILED"
    assert conn.closed_within(5)


def test_unreachable_auth_server_is_e_auth_failed(servers: Servers, connect: Connect) -> None:
    nsqd = servers.nsqd(auth_http_address=f"{HOST}:{free_port()}", http_client_connect_timeout="500ms")
    conn = connect(nsqd)
    conn.auth("anything")
    conn.expect_fatal("E_AUTH_FAILED", timeout=8)
