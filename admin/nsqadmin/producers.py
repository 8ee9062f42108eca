"""The nsqd nodes of a cluster as nsqadmin lists them (Go's ``Producer`` JSON): built from
lookupds' ``/nodes`` and ``/lookup`` answers or from nsqds' own ``/info`` and ``/stats``.
Pure functions over the answers; the fetching is :mod:`nsqadmin.clusterinfo`'s."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

_VERSION = re.compile(r"(\d+)\.(\d+)\.(\d+)")


def version_key(version: str) -> tuple[int, int, int]:
    """A semantic version's numbers; (0, 0, 0) for anything unreadable, as Go treats it."""
    match = _VERSION.match(version or "")
    return (int(match[1]), int(match[2]), int(match[3])) if match else (0, 0, 0)


@dataclass
class Producer:
    broadcast_address: str
    tcp_port: int
    http_port: int
    hostname: str = ""
    version: str = ""
    remote_address: str = ""
    remote_addresses: list[str] | None = None
    topics: list[tuple[str, bool]] = field(default_factory=list)  # (topic, tombstoned), sorted
    out_of_date: bool = False
    url: str = ""  # where its HTTP API is asked: the configured address, else http://http_address

    def __post_init__(self) -> None:
        self.url = self.url or f"http://{self.http_address}"

    @property
    def http_address(self) -> str:
        """``broadcast_address:http_port``: the node's name in nsqadmin's routes."""
        return f"{self.broadcast_address}:{self.http_port}"

    @property
    def tcp_address(self) -> str:
        return f"{self.broadcast_address}:{self.tcp_port}"

    def to_json(self) -> dict[str, Any]:
        return {
            "remote_addresses": self.remote_addresses,
            "remote_address": self.remote_address,
            "hostname": self.hostname,
            "broadcast_address": self.broadcast_address,
            "tcp_port": self.tcp_port,
            "http_port": self.http_port,
            "version": self.version,
            "topics": [{"topic": t, "tombstoned": dead} for t, dead in self.topics] or None,
            "out_of_date": self.out_of_date,
        }


def from_lookupd(entry: dict[str, Any]) -> Producer:
    """One producer of lookupd's ``/nodes`` (topics with their tombstones) or ``/lookup``."""
    topics = entry.get("topics") or []
    tombstones = entry.get("tombstones") or []
    pairs = sorted((str(t), bool(tombstones[i]) if i < len(tombstones) else False) for i, t in enumerate(topics))
    return Producer(broadcast_address=str(entry.get("broadcast_address", "")),
                    tcp_port=int(entry.get("tcp_port", 0)), http_port=int(entry.get("http_port", 0)),
                    hostname=str(entry.get("hostname", "")), version=str(entry.get("version", "")),
                    remote_address=str(entry.get("remote_address", "")), topics=pairs)


def from_nsqd(address: str, info: dict[str, Any], topic_names: list[str]) -> Producer:
    """A producer from an nsqd's ``/info`` and the topics of its ``/stats``, asked at
    ``address`` (an HTTPS one keeps its scheme and port); an nsqd that does not say its
    broadcast address or hostname is named by ``address``."""
    host, _, port = address.rpartition("://")[2].rpartition(":")
    broadcast = str(info.get("broadcast_address") or host)
    http_port = int(info.get("http_port") or port)
    return Producer(broadcast_address=broadcast, tcp_port=int(info.get("tcp_port", 0)), http_port=http_port,
                    hostname=str(info.get("hostname") or host), version=str(info.get("version", "")),
                    topics=sorted((t, False) for t in topic_names),
                    url=address if "://" in address else f"http://{address}")


def merge_lookupd_nodes(answers: list[tuple[str, list[dict[str, Any]]]]) -> list[Producer]:
    """The union of several lookupds' ``/nodes``: one producer per TCP address, with every
    lookupd's ``lookupd/remote_address`` in ``remote_addresses``; a node older than the
    newest version seen is ``out_of_date``. Sorted by hostname, then address."""
    merged: dict[str, Producer] = {}
    for lookupd, entries in answers:
        for entry in entries:
            producer = from_lookupd(entry)
            kept = merged.setdefault(producer.tcp_address, producer)
            if kept.remote_addresses is None:
                kept.remote_addresses = []
            kept.remote_addresses.append(f"{lookupd}/{producer.remote_address or 'N/A'}")
    newest = max((version_key(p.version) for p in merged.values()), default=(0, 0, 0))
    for producer in merged.values():
        producer.out_of_date = version_key(producer.version) < newest
    return sorted(merged.values(), key=lambda p: (p.hostname, p.http_address))


def merge_topic_producers(answers: list[list[dict[str, Any]]]) -> list[Producer]:
    """The union of several lookupds' ``/lookup`` producers, one per HTTP address."""
    merged: dict[str, Producer] = {}
    for entries in answers:
        for entry in entries:
            producer = from_lookupd(entry)
            merged.setdefault(producer.http_address, producer)
    return list(merged.values())


def search(producers: list[Producer], node: str) -> Producer | None:
    """The producer whose ``broadcast_address:http_port`` is ``node``."""
    return next((p for p in producers if p.http_address == node), None)
