"""AUTH's place in the connection's state machine (test_auth.py covers grants, TTLs and
auth servers): SUB needs AUTH first, AUTH comes once and only before SUB, and an answer
without authorizations admits nothing."""
from __future__ import annotations

from typing import Iterator

import pytest

from tests.broker.auth_server import AuthServer, Grant, Identity
from tests.broker.conftest import Connect
from tests.conftest import Servers
from tests.servers import Nsqd


@pytest.fixture(scope="module")
def auth_server() -> Iterator[AuthServer]:
    server = AuthServer().start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def auth_nsqd(module_servers: Servers, auth_server: AuthServer) -> Nsqd:
    return module_servers.nsqd(auth_http_address=auth_server.address)


def test_sub_before_auth_is_e_auth_first(auth_nsqd: Nsqd, connect: Connect, topic: str) -> None:
    conn = connect(auth_nsqd)
    conn.sub(topic, "ch")
    conn.expect_fatal("E_AUTH_FIRST")


def test_auth_twice_is_fatal(auth_nsqd: Nsqd, auth_server: AuthServer, connect: Connect,
                             topic: str) -> None:
    auth_server.grant("s-twice", Identity("twice", [Grant(f"^{topic}$", [".*"], ["publish"])]))
    conn = connect(auth_nsqd)
    conn.auth("s-twice")
    conn.read_json()
    conn.auth("s-twice")
    conn.expect_fatal("E_INVALID")


def test_auth_after_sub_is_fatal(auth_nsqd: Nsqd, auth_server: AuthServer, connect: Connect,
                                 topic: str) -> None:
    auth_server.grant("s-late", Identity("late", [Grant(f"^{topic}$", [".*"], ["subscribe"])]))
    conn = connect(auth_nsqd)
    conn.auth("s-late")
    conn.read_json()
    conn.sub(topic, "ch")
    conn.expect_ok()
    conn.auth("s-late")
    conn.expect_fatal("E_INVALID")


def test_answer_without_authorizations_is_e_unauthorized(auth_nsqd: Nsqd, auth_server: AuthServer,
                                                         connect: Connect) -> None:
    auth_server.grant("s-empty", Identity("nobody", []))
    conn = connect(auth_nsqd)
    conn.auth("s-empty")
    conn.expect_fatal("E_UNAUTHORIZED")
