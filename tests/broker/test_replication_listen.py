"""--replication-listen-address: the replication listener binds an address of its own, so a
node whose name in the peer list resolves only once it runs (a StatefulSet pod's DNS name)
starts; without it, nsqd binds its name and cannot start while that does not resolve."""
from __future__ import annotations

import socket
from pathlib import Path

import pytest

from tests.servers import Nsqd, free_port

pytestmark = pytest.mark.timeout(60)

HOST = "127.0.35.1"
UNRESOLVED = "nsqd-0.nsqd-headless.example.invalid"  # .invalid never resolves (RFC 6761)


def flags(port: int, **extra: str) -> dict[str, str]:
    return {"replication-address": f"{UNRESOLVED}:{port}",
            "replication-peer": f"{UNRESOLVED}:{port},nsqd-1.nsqd-headless.example.invalid:{port}",
            "topic-replicas": "2", **extra}


def test_the_listener_binds_the_listen_address_and_the_node_keeps_its_name(tmp_path: Path) -> None:
    port = free_port(HOST)
    node = Nsqd(tmp_path / "nsqd", flags(port, **{"replication-listen-address": f"{HOST}:{port}"}), host=HOST)
    node.start()
    try:
        with socket.create_connection((HOST, port), timeout=5):
            pass
        assert node.get_json("/replication")["node"] == f"{UNRESOLVED}:{port}"
    finally:
        node.stop()


def test_without_it_a_name_that_does_not_resolve_cannot_be_bound(tmp_path: Path) -> None:
    port = free_port(HOST)
    node = Nsqd(tmp_path / "nsqd", flags(port), host=HOST)
    try:
        with pytest.raises(RuntimeError, match="exited with") as failed:
            node.start(timeout=15)
    finally:
        node.stop()
    assert UNRESOLVED in str(failed.value), "the log should name the address it could not bind"
