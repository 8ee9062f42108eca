"""Where the test kubelet's pods really listen: each pod's process on its own loopback
address, published in an address book file that the operator's test resolver and the
tests read."""
from __future__ import annotations

import itertools
import json
import os
from pathlib import Path
from typing import Any

from nsq_operator.builders import names
from nsq_operator.models.cluster import ClusterRef

ADDRESS_BOOK = "pods.json"
REPLICATION_BOOK = "replication.json"  # pod -> the loopback host:port its replication DNS name stands for
_hosts = itertools.count(2)


def next_host() -> str:
    n = next(_hosts)
    return f"127.0.{n // 250}.{n % 250 + 2}"


def write_book(root: Path, book: dict[str, Any], name: str = ADDRESS_BOOK) -> None:
    path = root / name
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps(book))
    os.replace(temporary, path)


class AddressBook:
    """The test side's view of the kubelet's address book (read afresh each time: it is
    tiny, and a cache keyed on file stamps can miss a rewrite within one clock tick).
    An entry: ``{"component", "host", "tcp_port", "http_port", "https_port", "pid"}``."""

    def __init__(self, root: Path) -> None:
        self.path = root / ADDRESS_BOOK
        self.replication_path = root / REPLICATION_BOOK

    def replication(self, pod: str) -> str:
        """The address a pod's replication DNS name stands for; ConnectionError until the
        kubelet gave it one (the first time a pod's flags named it)."""
        try:
            found = json.loads(self.replication_path.read_text()).get(pod)
        except FileNotFoundError:
            found = None
        if found is None:
            raise ConnectionError(f"no replication address for {pod} yet")
        return str(found)

    def pods(self) -> dict[str, dict[str, Any]]:
        try:
            return dict(json.loads(self.path.read_text()))
        except FileNotFoundError:
            return {}

    def http(self, pod: str) -> str:
        entry = self.pods().get(pod)
        if entry is None:
            return "http://127.0.0.1:1"  # a pod without a process: nothing answers, as in a cluster
        return f"http://{entry['host']}:{entry['http_port']}"

    def tcp(self, pod: str) -> str | None:
        entry = self.pods().get(pod)
        return None if entry is None else f"{entry['host']}:{entry['tcp_port']}"

    def pid(self, pod: str) -> int | None:
        entry = self.pods().get(pod)
        return None if entry is None else entry.get("pid")


class KubeletEndpoints:
    """The operator's view of pod addresses in tests: the kubelet's processes. It counts
    how often the operator looked an nsqd up (each pass that talks to an nsqd does once),
    so a test can tell passes ran that make no API request."""

    def __init__(self, book: AddressBook) -> None:
        self.book = book
        self.nsqd_lookups = 0

    def nsqd_http(self, cluster: ClusterRef, pod: str) -> str:
        self.nsqd_lookups += 1
        return self.book.http(pod)

    def nsqd_https(self, cluster: ClusterRef, pod: str) -> str:
        """By the pod's DNS name (which its certificate carries): the test resolves pod names
        (e2e.pod_dns) in the process that calls it."""
        entry = self.book.pods().get(pod) or {}
        return f"https://{names.nsqd_broadcast_address(cluster, pod)}:{entry.get('https_port') or 1}"

    def lookupd_http(self, cluster: ClusterRef, pod: str) -> str:
        return self.book.http(pod)

    def lookupd_tcp(self, cluster: ClusterRef, pod: str) -> str:
        # a lookupd not started yet keeps its DNS name: unreachable, as in a cluster before it runs
        return self.book.tcp(pod) or f"{pod}.{cluster.name}-lookupd.{cluster.namespace}.svc:4160"

    def nsqd_replication(self, cluster: ClusterRef, pod: str) -> str:
        return self.book.replication(pod)
