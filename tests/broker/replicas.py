"""Three replicated nsqd processes for tests, each on its own loopback address
(127.0.33.1-3, free ports): every topic on all three with --topic-replicas 3 (or 2)."""
from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterator, Mapping, Sequence

import pytest

from tests.broker.faults import WrappedNsqd
from tests.servers import Nsqd, free_port, http, wait_for


HOSTS = ("127.0.33.1", "127.0.33.2", "127.0.33.3", "127.0.33.4")


class Cluster:
    """``wrap``: node index -> a command prefix nsqd runs under (``faults.py``)."""

    def __init__(self, root: Path, replicas: int, wrap: Mapping[int, Sequence[str]] | None = None,
                 size: int = 3, **flags: object) -> None:
        self.root = root
        self.flags = {"topic-replicas": replicas, "replication-failover-timeout": "1s",
                      "replication-timeout": "2s", **{k.replace("_", "-"): v for k, v in flags.items()}}
        self.peers = [f"{host}:{free_port(host)}" for host in HOSTS[:size]]
        self.nodes: list[Nsqd] = []
        for i, peer in enumerate(self.peers):
            node_flags = {"replication-address": peer, "replication-peer": ",".join(self.peers), **self.flags}
            host = peer.rsplit(":", 1)[0]
            prefix = (wrap or {}).get(i)
            self.nodes.append(WrappedNsqd(root / f"nsqd{i}", node_flags, host, prefix) if prefix
                              else Nsqd(root / f"nsqd{i}", node_flags, host=host))

    def grow(self, epoch: int) -> Nsqd:
        """A new nsqd on the next host, started with the list of every node and ``epoch``
        (as the operator starts a pod added by a scale-up); the others are not told."""
        host = HOSTS[len(self.nodes)]
        peer = f"{host}:{free_port(host)}"
        self.peers.append(peer)
        node = Nsqd(self.root / f"nsqd{len(self.nodes)}", {
            "replication-address": peer, "replication-peer": ",".join(self.peers),
            "replication-membership-epoch": epoch, **self.flags}, host=host)
        self.nodes.append(node)
        node.start()
        return node

    def start(self) -> "Cluster":
        for node in self.nodes:
            node.start()
        return self

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()

    def replication(self, i: int) -> dict:
        return self.nodes[i].get_json("/replication")

    def wait_backups_hold(self, count: int, backups: Sequence[int] = (1, 2)) -> None:
        """Until each of ``backups`` holds ``count`` live copies of the first node's
        messages (FINs reach them after the messages, unacknowledged)."""
        for i in backups:
            wait_for(lambda: self.replication(i)["held_copies"].get(self.peers[0]) == count, 10,
                     message=f"backup {i} holding {count} copies")

    def wait_connected(self) -> None:
        for i in range(len(self.nodes)):
            wait_for(lambda: all(b["connected"] for b in self.replication(i)["backups"]), 10,
                     message=f"nsqd {i} connected to its backups")


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Callable[..., Cluster]]:
    """Makes started, connected replicated clusters; stops every one at the end of the test."""
    made: list[Cluster] = []

    def make(replicas: int = 3, wrap: Mapping[int, Sequence[str]] | None = None, size: int = 3,
             **flags: object) -> Cluster:
        made.append(Cluster(tmp_path, replicas, wrap, size, **flags))
        made[-1].start()  # stopped at the end even when a node fails to start
        made[-1].wait_connected()
        return made[-1]
    yield make
    for c in made:
        c.stop()


def post(node: Nsqd, path: str, body: bytes | None = None) -> None:
    status, answer = http("POST", node.url(path), body)
    assert status == 200, (path, status, answer)
