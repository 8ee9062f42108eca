"""nsqd with --auth-http-address: AUTH asks the auth server, whose grants (topic and
channel patterns, publish/subscribe) decide PUB/MPUB/DPUB/SUB; the answer is re-asked
when its TTL runs out; a broken or absent auth server refuses the client, never nsqd."""
from __future__ import annotations

import socket
import time
import uuid
from typing import Any, Callable, Iterator

import pytest

from tests.broker.auth_server import AuthServer, Grant, Identity
from tests.broker.certs import Pki, make_pki
from tests.broker.tls_nsqd import TlsNsqd
from tests.broker.tls_wire import TlsWireConn
from tests.broker.wire import WireConn
from tests.servers import HOST, Nsqd, free_port, http, wait_for

PUB_SUB = ["publish", "subscribe"]


@pytest.fixture(scope="module")
def auth_server() -> Iterator[AuthServer]:
    server = AuthServer().start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def auth_nsqd(module_servers: Any, auth_server: AuthServer) -> Nsqd:
    return module_servers.nsqd(auth_http_address=auth_server.address)


@pytest.fixture
def secret() -> str:
    return f"s-{uuid.uuid4().hex}"


def authed(connect: Callable[..., WireConn], server: Nsqd, secret: str) -> tuple[WireConn, dict[str, Any]]:
    conn = connect(server)
    conn.auth(secret)
    return conn, conn.read_json()


# -- allowed ------------------------------------------------------------------------
def test_auth_answers_identity_and_allows_granted_topics(auth_nsqd: Nsqd, auth_server: AuthServer,
                                                         connect: Any, secret: str, topic: str) -> None:
    auth_server.grant(secret, Identity("alice", [Grant(f"^{topic}$", [".*"], PUB_SUB)], url="https://id/alice"))
    producer, answer = authed(connect, auth_nsqd, secret)
    assert answer == {"identity": "alice", "identity_url": "https://id/alice", "permission_count": 1}
    consumer, _ = authed(connect, auth_nsqd, secret)
    consumer.sub(topic, "ch")
    consumer.expect_ok()
    consumer.rdy(5)
    producer.pub(topic, b"one")
    producer.expect_ok()
    producer.mpub(topic, [b"two", b"three"])
    producer.expect_ok()
    producer.dpub(topic, 10, b"four")
    producer.expect_ok()
    assert sorted(m.body for m in consumer.read_messages(4)) == [b"four", b"one", b"three", b"two"]

    query = auth_server.queries_for(secret)[0]
    assert query == {"remote_ip": "127.0.0.1", "tls": "false", "secret": secret, "common_name": ""}
    clients = auth_nsqd.channel(topic, "ch")["clients"]
    assert [(c["authed"], c["auth_identity"], c["auth_identity_url"]) for c in clients] == [
        (True, "alice", "https://id/alice")]


def test_other_topics_are_unauthorized(auth_nsqd: Nsqd, auth_server: AuthServer, connect: Any,
                                       secret: str, topic: str) -> None:
    auth_server.grant(secret, Identity("alice", [Grant(f"^{topic}$", [".*"], PUB_SUB)]))
    conn, _ = authed(connect, auth_nsqd, secret)
    conn.pub(topic + "-other", b"x")
    frame = conn.expect_fatal("E_UNAUTHORIZED")
    assert frame.data == f'E_UNAUTHORIZED AUTH failed for PUB on "{topic}-other" ""'.encode()


def test_channels_outside_the_grant_are_unauthorized(auth_nsqd: Nsqd, auth_server: AuthServer, connect: Any,
                                                     secret: str, topic: str) -> None:
    auth_server.grant(secret, Identity("alice", [Grant(f"^{topic}$", ["^allowed$"], PUB_SUB)]))
    ok, _ = authed(connect, auth_nsqd, secret)
    ok.sub(topic, "allowed")
    ok.expect_ok()
    denied, _ = authed(connect, auth_nsqd, secret)
    denied.sub(topic, "forbidden")
    frame = denied.expect_fatal("E_UNAUTHORIZED")
    assert frame.data == f'E_UNAUTHORIZED AUTH failed for SUB on "{topic}" "forbidden"'.encode()


@pytest.mark.parametrize("command", ["PUB", "MPUB", "DPUB"])
def test_subscribe_permission_does_not_allow_publishing(auth_nsqd: Nsqd, auth_server: AuthServer, connect: Any,
                                                        secret: str, topic: str, command: str) -> None:
    auth_server.grant(secret, Identity("reader", [Grant(".*", [".*"], ["subscribe"])]))
    conn, _ = authed(connect, auth_nsqd, secret)
    {"PUB": lambda: conn.pub(topic, b"x"), "MPUB": lambda: conn.mpub(topic, [b"x", b"y"]),
     "DPUB": lambda: conn.dpub(topic, 5, b"x")}[command]()
    frame = conn.expect_fatal("E_UNAUTHORIZED")
    assert frame.data == f'E_UNAUTHORIZED AUTH failed for {command} on "{topic}" ""'.encode()
    assert auth_nsqd.topic(topic) is None


def test_publish_permission_does_not_allow_subscribing(auth_nsqd: Nsqd, auth_server: AuthServer, connect: Any,
                                                       secret: str, topic: str) -> None:
    auth_server.grant(secret, Identity("writer", [Grant(".*", [".*"], ["publish"])]))
    writer, _ = authed(connect, auth_nsqd, secret)
    writer.pub(topic, b"x")
    writer.expect_ok()
    reader, _ = authed(connect, auth_nsqd, secret)
    reader.sub(topic, "ch")
    reader.expect_fatal("E_UNAUTHORIZED")


def test_grants_are_combined(auth_nsqd: Nsqd, auth_server: AuthServer, connect: Any, secret: str, topic: str) -> None:
    auth_server.grant(secret, Identity("mixed", [Grant(f"^{topic}-in$", [".*"], ["publish"]),
                                                 Grant(f"^{topic}-out$", ["^mine$"], ["subscribe"])]))
    conn, answer = authed(connect, auth_nsqd, secret)
    assert answer["permission_count"] == 2
    conn.pub(f"{topic}-in", b"x")
    conn.expect_ok()
    conn.sub(f"{topic}-out", "mine")
    conn.expect_ok()


def test_an_unknown_secret_fails(auth_nsqd: Nsqd, connect: Any, secret: str) -> None:
    conn = connect(auth_nsqd)
    conn.auth(secret)  # the auth server answers 403 for it
    assert conn.expect_fatal("E_AUTH_FAILED").data == b"E_AUTH_FAILED AUTH failed"


@pytest.mark.parametrize("answer", [
    {"identity": "x", "ttl": 0, "authorizations": [{"topic": ".*", "channels": [".*"], "permissions": ["publish"]}]},
    {"identity": "x", "ttl": 60, "authorizations": [{"topic": ".*", "channels": [".*"], "permissions": ["admin"]}]},
    {"identity": "x", "ttl": 60, "authorizations": [{"topic": "(", "channels": [".*"], "permissions": ["publish"]}]},
])
def test_unusable_auth_answers_fail(auth_nsqd: Nsqd, auth_server: AuthServer, connect: Any, secret: str,
                                    answer: dict[str, Any]) -> None:
    class Raw(Identity):
        def answer(self) -> dict[str, Any]:
            return answer
    auth_server.grant(secret, Raw("x"))
    conn = connect(auth_nsqd)
    conn.auth(secret)
    conn.expect_fatal("E_AUTH_FAILED")


# -- TTL --------------------------------------------------------------------------------
def test_expired_ttl_is_checked_again(auth_nsqd: Nsqd, auth_server: AuthServer, connect: Any,
                                      secret: str, topic: str) -> None:
    auth_server.grant(secret, Identity("alice", [Grant(f"^{topic}$", [".*"], ["publish"])], ttl=1))
    conn, _ = authed(connect, auth_nsqd, secret)
    authed_at = time.monotonic()

    def publish_ok() -> bool:
        conn.pub(topic, b"x")
        conn.expect_ok()
        return True

    # within the TTL the answer is cached; after it, the next PUB asks again and passes
    wait_for(lambda: publish_ok() and len(auth_server.queries_for(secret)) == 2, 5,
             message="a second auth query after the TTL")
    assert time.monotonic() - authed_at >= 1.0

    # the grant is revoked: PUBs pass until the refreshed answer says no
    auth_server.grant(secret, Identity("alice", [Grant("^somewhere-else$", [".*"], ["publish"])], ttl=1))
    revoked_at = time.monotonic()
    outcome: list[bytes] = []

    def refused() -> bool:
        conn.pub(topic, b"x")
        frame = conn.next_frame()
        if frame.is_error:
            outcome.append(frame.data)
            return True
        assert frame.data == b"OK"
        return False

    wait_for(refused, 5, message="E_UNAUTHORIZED after the revoked grant's TTL")
    assert outcome == [f'E_UNAUTHORIZED AUTH failed for PUB on "{topic}" ""'.encode()]
    assert time.monotonic() - revoked_at <= 2.5
    assert conn.closed_within(5)


# -- broken auth servers ------------------------------------------------------------------
def test_auth_server_down_fails_the_client_and_nsqd_carries_on(servers: Any, connect: Any, secret: str) -> None:
    dead = f"{HOST}:{free_port()}"
    server = servers.nsqd(auth_http_address=dead)
    conn = connect(server)
    conn.auth(secret)
    assert conn.expect_fatal("E_AUTH_FAILED").data == b"E_AUTH_FAILED AUTH failed"
    assert http("GET", server.url("/ping")) == (200, b"OK")
    wait_for(lambda: dead in server.log() and "auth" in server.log().lower(), 5,
             message="the log names the unreachable auth server")
    assert "Traceback" not in server.log()


def test_a_hanging_auth_server_times_out_without_blocking_nsqd(servers: Any, connect: Any, secret: str) -> None:
    with socket.socket() as silent:  # accepts connections (backlog) and never answers
        silent.bind((HOST, 0))
        silent.listen(16)
        server = servers.nsqd(auth_http_address=f"{HOST}:{silent.getsockname()[1]}",
                              http_client_request_timeout="1s")
        conn = connect(server)
        started = time.monotonic()
        conn.auth(secret)
        assert http("GET", server.url("/ping"), timeout=0.5) == (200, b"OK")  # served meanwhile
        conn.expect_fatal("E_AUTH_FAILED", timeout=5)
        assert 0.8 <= time.monotonic() - started < 4


def test_auth_server_error_fails_the_client(servers: Any, connect: Any, secret: str) -> None:
    broken = AuthServer().start()
    try:
        broken.grant(secret, Identity("alice", [Grant(".*", [".*"], PUB_SUB)]))
        broken.status = 500
        server = servers.nsqd(auth_http_address=broken.address)
        conn = connect(server)
        conn.auth(secret)
        conn.expect_fatal("E_AUTH_FAILED")
    finally:
        broken.stop()


def test_auth_server_lost_at_refresh_fails_the_next_command(servers: Any, connect: Any, secret: str,
                                                            topic: str) -> None:
    auth = AuthServer().start()
    try:
        auth.grant(secret, Identity("alice", [Grant(".*", [".*"], PUB_SUB)], ttl=1))
        server = servers.nsqd(auth_http_address=auth.address)
        conn, _ = authed(connect, server, secret)
        conn.pub(topic, b"x")
        conn.expect_ok()
        auth.status = 500

        def failed() -> bool:
            conn.pub(topic, b"x")
            frame = conn.next_frame()
            return frame.is_error and frame.data == b"E_AUTH_FAILED AUTH failed"

        wait_for(failed, 5, message="E_AUTH_FAILED once the TTL ran out")
    finally:
        auth.stop()
    assert http("GET", server.url("/ping")) == (200, b"OK")


def test_any_reachable_auth_server_will_do(servers: Any, connect: Any, auth_server: AuthServer,
                                           secret: str) -> None:
    auth_server.grant(secret, Identity("alice", [Grant(".*", [".*"], PUB_SUB)]))
    dead = f"{HOST}:{free_port()}"
    server = servers.nsqd(auth_http_address=[dead, auth_server.address])
    for _ in range(4):  # the first server asked is random; each AUTH must succeed anyway
        _, answer = authed(connect, server, secret)
        assert answer["identity"] == "alice"


def test_post_request_method(servers: Any, connect: Any, secret: str) -> None:
    auth = AuthServer().start()
    try:
        auth.grant(secret, Identity("alice", [Grant(".*", [".*"], PUB_SUB)]))
        server = servers.nsqd(auth_http_address=auth.address, auth_http_request_method="post")
        _, answer = authed(connect, server, secret)
        assert answer["identity"] == "alice"
        assert auth.methods == ["POST"]
        assert auth.queries_for(secret)[0]["tls"] == "false"
    finally:
        auth.stop()


# -- HTTP and TLS ---------------------------------------------------------------------------
def test_http_publishing_needs_no_auth(auth_nsqd: Nsqd, topic: str) -> None:
    """nsqd applies auth to TCP clients only; its HTTP API is open (protect it by network)."""
    assert http("POST", auth_nsqd.url(f"/pub?topic={topic}"), b"over http") == (200, b"OK")
    assert auth_nsqd.topic(topic)["message_count"] == 1


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


def test_auth_over_tls_sends_the_client_certificate_common_name(tmp_path: Any, pki: Pki, auth_server: AuthServer,
                                                                secret: str, topic: str) -> None:
    auth_server.grant(secret, Identity("alice", [Grant(".*", [".*"], PUB_SUB)]))
    server = TlsNsqd(tmp_path / "nsqd", pki, {"auth-http-address": auth_server.address,
                                              "tls-client-auth-policy": "require-verify",
                                              "tls-root-ca-file": str(pki.ca)}).start()
    conn = TlsWireConn(server.tcp_address)
    try:
        answer = conn.negotiate_tls(pki.client_context(with_cert=pki.client))
        assert answer["auth_required"] is True
        conn.auth(secret)
        assert conn.read_json()["identity"] == "alice"
        conn.pub(topic, b"secure")
        conn.expect_ok()
        assert auth_server.queries_for(secret)[0] == {"remote_ip": "127.0.0.1", "tls": "true",
                                                      "secret": secret, "common_name": "alice"}
        assert answer["tls_v1"] is True
    finally:
        conn.close()
        server.stop()
