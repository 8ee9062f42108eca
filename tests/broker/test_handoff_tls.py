"""A scale-down's handoff to nsqds whose plain HTTP is closed (--tls-required=true, as an
NsqCluster with spec.tls runs them): targets named https://host:port are verified against
--tls-root-ca-file and take the backlog; one whose certificate that CA did not sign is
refused and the backlog stays on disk."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

import pytest

from tests.broker.certs import Pki, make_pki
from tests.broker.tls_nsqd import TlsNsqd
from tests.broker.tls_wire import TlsWireConn
from tests.servers import wait_for


@pytest.fixture
def pki(tmp_path: Path) -> Pki:
    return make_pki(tmp_path / "pki")


@pytest.fixture
def started() -> Iterator[list[TlsNsqd]]:
    running: list[TlsNsqd] = []
    yield running
    for nsqd in running:
        nsqd.stop()


def https_only(tmp_path: Path, pki: Pki, started: list[TlsNsqd], name: str, **flags: Any) -> TlsNsqd:
    nsqd = TlsNsqd(tmp_path / name, pki, {"tls-required": "true", "tls-root-ca-file": str(pki.ca), **flags})
    started.append(nsqd)
    return nsqd.start()


def handed_off(source: TlsNsqd, target: str) -> dict[str, Any]:
    status, _ = source.https("POST", f"/drain?handoff={target}")
    assert status == 200
    return wait_for(lambda: (h := source.https_json("/drain")["handoff"]) and h["finished"] and h, 20,
                    message="the handoff attempt ends")


def test_the_backlog_goes_to_an_https_target(tmp_path: Path, pki: Pki, started: list[TlsNsqd]) -> None:
    source = https_only(tmp_path, pki, started, "source", **{"drain-timeout": "1s"})
    target = https_only(tmp_path, pki, started, "target")
    assert source.https("POST", "/topic/create?topic=orders")[0] == 200
    assert source.https("POST", "/channel/create?topic=orders&channel=billing")[0] == 200
    for i in range(5):
        assert source.https("POST", "/pub?topic=orders", f"m{i}".encode())[0] == 200
    state = handed_off(source, f"https://localhost:{target.https_port}")
    assert state["error"] is None and state["messages_left"] == 0, state
    conn = TlsWireConn(target.tcp_address)
    try:
        conn.negotiate_tls(pki.client_context(), server_hostname="localhost")
        conn.sub("orders", "billing")
        conn.expect_ok()
        conn.rdy(10)
        assert sorted(m.body for m in conn.read_messages(5)) == [f"m{i}".encode() for i in range(5)]
    finally:
        conn.close()


def test_a_target_the_ca_did_not_sign_is_refused_and_nothing_leaves(tmp_path: Path, pki: Pki,
                                                                     started: list[TlsNsqd]) -> None:
    stranger = make_pki(tmp_path / "other-pki")
    source = https_only(tmp_path, pki, started, "source", **{"drain-timeout": "1s"})
    target = https_only(tmp_path, stranger, started, "target")
    assert source.https("POST", "/pub?topic=orders", b"stays")[0] == 200
    state = handed_off(source, f"https://localhost:{target.https_port}")
    assert state["error"] and "CERTIFICATE_VERIFY_FAILED" in state["error"], state
    assert state["messages_left"] == 1
