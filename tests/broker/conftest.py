"""Fixtures for driving a real nsqd: servers shared by the whole session (starting one
costs about a second), unique topic names, and raw V2 connections closed at teardown.

Tests on a shared server use their own topic and change no server-wide state; a test
that must (flags, /config PUT, restarts) starts its own with ``servers.nsqd(...)``."""
from __future__ import annotations

import uuid
from typing import Any, Callable, Iterator

import pytest

from tests.broker.wire import WireConn
from tests.conftest import Servers
from tests.reference import FLAVOURS, GoNsqd, flavour_or_skip
from tests.servers import Nsqd

Connect = Callable[..., WireConn]

# one server whose flags bound everything the limit tests need; each value is chosen so
# that default clients still work (msg timeout 1s, RDY up to 5, bodies up to 1 KiB);
# --max-req-timeout is short because tests wait for it (DPUB, /pub defer, REQ's clamp)
LIMITED_FLAGS: dict[str, object] = dict(
    max_rdy_count=5, msg_timeout="1s", max_msg_timeout="2s", max_req_timeout="1s",
    max_channel_consumers=2, max_deflate_level=4, max_heartbeat_interval="5s",
    max_output_buffer_size=1000, max_output_buffer_timeout="2s", output_buffer_timeout="100ms",
    max_msg_size=1024, max_body_size=4096)


@pytest.fixture(scope="session")
def session_servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    s = Servers(tmp_path_factory.mktemp("broker-servers"))
    yield s
    s.close()


@pytest.fixture(scope="session")
def nsqd(session_servers: Servers) -> Nsqd:
    """nsqd with default flags, shared by every test of this folder that asks for it."""
    return session_servers.nsqd()


@pytest.fixture(scope="session")
def limited(session_servers: Servers) -> Nsqd:
    """nsqd started with LIMITED_FLAGS, shared like ``nsqd``."""
    return session_servers.nsqd(**LIMITED_FLAGS)


@pytest.fixture(scope="session")
def go_nsqd(session_servers: Servers) -> Nsqd:
    """Go's nsqd v1.3.0 with default flags (tests/reference.py), shared like ``nsqd``."""
    flavour_or_skip("go")
    return session_servers.nsqd(kind=GoNsqd)


@pytest.fixture(scope="session")
def go_limited(session_servers: Servers) -> Nsqd:
    flavour_or_skip("go")
    return session_servers.nsqd(kind=GoNsqd, **LIMITED_FLAGS)


@pytest.fixture(params=FLAVOURS)
def each_nsqd(request: pytest.FixtureRequest) -> Nsqd:
    """``nsqd``, then Go's (``go_nsqd``): a test taking it holds for both."""
    return request.getfixturevalue("nsqd" if request.param == "ours" else "go_nsqd")


@pytest.fixture(params=FLAVOURS)
def each_limited(request: pytest.FixtureRequest) -> Nsqd:
    """``limited``, then Go's nsqd with the same flags."""
    return request.getfixturevalue("limited" if request.param == "ours" else "go_limited")


@pytest.fixture
def topic() -> str:
    return f"t-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def connect() -> Iterator[Connect]:
    """``connect(server_or_address, **WireConn kwargs)``; every connection is closed after the test."""
    opened: list[WireConn] = []

    def open_conn(target: Nsqd | str, **kwargs: Any) -> WireConn:
        address = target.tcp_address if isinstance(target, Nsqd) else target
        conn = WireConn(address, **kwargs)
        opened.append(conn)
        return conn

    yield open_conn
    for conn in opened:
        conn.close()


@pytest.fixture
def consumer(connect: Connect) -> Callable[..., WireConn]:
    """``consumer(server, topic, channel, rdy=..., identify=...)``: a subscribed connection."""

    def subscribe(server: Nsqd, topic: str, channel: str, rdy: int | None = None,
                  identify: dict[str, Any] | None = None) -> WireConn:
        conn = connect(server)
        if identify is not None:
            conn.identify(identify)
            conn.expect_ok()
        conn.sub(topic, channel)
        conn.expect_ok()
        if rdy is not None:
            conn.rdy(rdy)
        return conn

    return subscribe


@pytest.fixture
def publish(connect: Connect) -> Callable[..., None]:
    """``publish(server, topic, *bodies)``: PUB each body over one connection, each OK'd."""

    def pub(server: Nsqd, topic: str, *bodies: bytes) -> None:
        conn = connect(server)
        for body in bodies:
            conn.pub(topic, body)
            conn.expect_ok()
        conn.close()

    return pub
