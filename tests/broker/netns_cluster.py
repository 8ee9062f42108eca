"""Replicated nsqds each in its own network namespace (``netns.py``), every topic on 3
of them, for the partition tests: started, connected to their backups, stopped."""
from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from tests.broker import netns
from tests.servers import wait_for

REPLICATION_PORT = 4153


class NetnsCluster:
    def __init__(self, root: Path, spaces: netns.Namespaces, **flags: object) -> None:
        self.spaces = spaces
        self.peers = [f"{ip}:{REPLICATION_PORT}" for ip in spaces.ips]
        self.nodes = [netns.NetnsNsqd(root / f"nsqd{i}", {
            "replication-address": peer, "replication-peer": ",".join(self.peers), "topic-replicas": 3,
            "replication-failover-timeout": "1s", "replication-timeout": "2s",
            **{k.replace("_", "-"): v for k, v in flags.items()}}, name, ip)
            for i, (name, ip, peer) in enumerate(zip(spaces.names, spaces.ips, self.peers))]

    def replication(self, i: int) -> dict:
        return self.nodes[i].get_json("/replication")

    def in_sync(self) -> bool:
        return all(b["state"] == "in_sync" for i in range(len(self.nodes)) for b in self.replication(i)["backups"])


@contextmanager
def netns_cluster(root: Path, size: int, **flags: object) -> Iterator[NetnsCluster]:
    """``size`` nsqds in namespaces of their own, every backup in sync; all stopped after."""
    spaces = netns.Namespaces(size)
    cluster = NetnsCluster(root, spaces, **flags)
    try:
        for node in cluster.nodes:
            node.start()
        wait_for(cluster.in_sync, 15, message="every nsqd in sync with its backups")
        yield cluster
    finally:
        for node in cluster.nodes:
            node.stop()
        spaces.close()
