"""What lookupd knows: peers (identified nsqd connections), the topics and channels
they registered, the ones created over HTTP, and tombstones.

Pure data: no I/O, no clock. Every method that depends on time takes ``now`` (seconds
on any monotonic clock, the same clock for every call).

Rules, as Go's lookupd keeps them:
- a topic or channel name stays known after its last producer leaves; an
  ``#ephemeral`` one is dropped only when its last producer UNREGISTERs that very name
  (a disconnect, or the UNREGISTER of a topic for its channels, leaves it known with no
  producers, as Go's lookupd does); HTTP delete forgets a name and its producers;
- a peer not heard from within ``inactive_producer_timeout`` is left out of ``lookup``
  and ``nodes``;
- a tombstone hides one peer for one topic from ``lookup`` for ``tombstone_lifetime``;
  it belongs to that registration, so it ends early only when the peer unregisters the
  topic (or disconnects) and registers it again.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from nsq_protocol.names import is_ephemeral


@dataclass(frozen=True, slots=True)
class PeerInfo:
    """A peer as lookupd reports it; ``id`` is the connection's remote address."""

    id: str
    remote_address: str
    hostname: str
    broadcast_address: str
    tcp_port: int
    http_port: int
    version: str

    @property
    def node(self) -> str:
        """How /topic/tombstone names a node: ``broadcast_address:http_port``."""
        return f"{self.broadcast_address}:{self.http_port}"

    def to_json(self) -> dict[str, object]:
        return {
            "remote_address": self.remote_address,
            "hostname": self.hostname,
            "broadcast_address": self.broadcast_address,
            "tcp_port": self.tcp_port,
            "http_port": self.http_port,
            "version": self.version,
        }


@dataclass(slots=True)
class _Peer:
    info: PeerInfo
    last_seen: float


@dataclass(slots=True)
class _TopicProducer:
    tombstoned_at: float | None = None


@dataclass(frozen=True, slots=True)
class Node:
    """One entry of /nodes: a live peer, its topics and whether each is tombstoned."""

    info: PeerInfo
    topics: list[str]
    tombstones: list[bool]


@dataclass(frozen=True, slots=True)
class LookupResult:
    channels: list[str]
    producers: list[PeerInfo]


@dataclass(frozen=True, slots=True)
class DebugEntry:
    """One (registration, producer) pair, for /debug."""

    registration: tuple[str, str, str]  # (category, key, subkey)
    info: PeerInfo
    last_seen: float
    tombstoned_at: float | None


@dataclass
class Registry:
    inactive_producer_timeout: float = 300.0
    tombstone_lifetime: float = 45.0
    _peers: dict[str, _Peer] = field(default_factory=dict)
    _topics: dict[str, dict[str, _TopicProducer]] = field(default_factory=dict)
    _channels: dict[str, dict[str, set[str]]] = field(default_factory=dict)  # topic -> channel -> peers

    # -- peers ---------------------------------------------------------------
    def add_peer(self, info: PeerInfo, now: float) -> None:
        self._peers[info.id] = _Peer(info, now)

    def has_peer(self, peer_id: str) -> bool:
        return peer_id in self._peers

    def touch_peer(self, peer_id: str, now: float) -> None:
        """The peer was heard from (any command)."""
        peer = self._peers.get(peer_id)
        if peer is not None:
            peer.last_seen = now

    def remove_peer(self, peer_id: str) -> list[tuple[str, str | None]]:
        """The peer's connection closed: drop it from every registration.
        Returns the (topic, channel) registrations it was removed from."""
        if self._peers.pop(peer_id, None) is None:
            return []
        removed: list[tuple[str, str | None]] = []
        for topic, channels in list(self._channels.items()):
            for channel in list(channels):
                if self._remove_channel_producer(topic, channel, peer_id, drop_ephemeral=False):
                    removed.append((topic, channel))
        for topic in list(self._topics):
            if self._remove_topic_producer(topic, peer_id, drop_ephemeral=False):
                removed.append((topic, None))
        return removed

    # -- what peers say over TCP ---------------------------------------------
    def register(self, peer_id: str, topic: str, channel: str | None = None) -> list[tuple[str, str | None]]:
        """REGISTER: the peer produces ``topic`` (and has ``channel``). Returns what is new."""
        added: list[tuple[str, str | None]] = []
        if channel is not None:
            peers = self._channels.setdefault(topic, {}).setdefault(channel, set())
            if peer_id not in peers:
                peers.add(peer_id)
                added.append((topic, channel))
        producers = self._topics.setdefault(topic, {})
        if peer_id not in producers:
            producers[peer_id] = _TopicProducer()
            added.append((topic, None))
        return added

    def unregister(self, peer_id: str, topic: str, channel: str | None = None) -> list[tuple[str, str | None]]:
        """UNREGISTER: of a channel, or of a topic (and then of all its channels).
        Returns what the peer was removed from."""
        removed: list[tuple[str, str | None]] = []
        if channel is not None:
            if self._remove_channel_producer(topic, channel, peer_id, drop_ephemeral=True):
                removed.append((topic, channel))
            return removed
        for name in list(self._channels.get(topic, {})):
            if self._remove_channel_producer(topic, name, peer_id, drop_ephemeral=False):
                removed.append((topic, name))
        if self._remove_topic_producer(topic, peer_id, drop_ephemeral=True):
            removed.append((topic, None))
        return removed

    def _remove_channel_producer(self, topic: str, channel: str, peer_id: str, drop_ephemeral: bool) -> bool:
        channels = self._channels.get(topic)
        peers = channels.get(channel) if channels is not None else None
        if peers is None:
            return False
        found = peer_id in peers
        peers.discard(peer_id)
        if drop_ephemeral and not peers and is_ephemeral(channel):
            del channels[channel]  # type: ignore[union-attr]
            if not channels:
                del self._channels[topic]
        return found

    def _remove_topic_producer(self, topic: str, peer_id: str, drop_ephemeral: bool) -> bool:
        producers = self._topics.get(topic)
        if producers is None:
            return False
        found = producers.pop(peer_id, None) is not None
        if drop_ephemeral and not producers and is_ephemeral(topic):
            del self._topics[topic]
        return found

    # -- what operators do over HTTP ------------------------------------------
    def create_topic(self, topic: str) -> None:
        self._topics.setdefault(topic, {})

    def delete_topic(self, topic: str) -> None:
        self._channels.pop(topic, None)
        self._topics.pop(topic, None)

    def create_channel(self, topic: str, channel: str) -> None:
        self._channels.setdefault(topic, {}).setdefault(channel, set())
        self._topics.setdefault(topic, {})

    def delete_channel(self, topic: str, channel: str) -> bool:
        """False when no such channel is known."""
        channels = self._channels.get(topic)
        if channels is None or channel not in channels:
            return False
        del channels[channel]
        if not channels:
            del self._channels[topic]
        return True

    def tombstone(self, topic: str, node: str, now: float) -> int:
        """Tombstone ``topic`` on the peers named ``node`` (``broadcast_address:http_port``).
        Returns how many producers were tombstoned."""
        count = 0
        for peer_id, producer in self._topics.get(topic, {}).items():
            peer = self._peers.get(peer_id)
            if peer is not None and peer.info.node == node:
                producer.tombstoned_at = now
                count += 1
        return count

    # -- queries -------------------------------------------------------------
    def topics(self) -> list[str]:
        return sorted(self._topics)

    def channels(self, topic: str) -> list[str]:
        return sorted(self._channels.get(topic, {}))

    def lookup(self, topic: str, now: float) -> LookupResult | None:
        """The topic's channels and its live, not tombstoned producers; None if unknown."""
        producers = self._topics.get(topic)
        if producers is None:
            return None
        live = [self._peers[peer_id].info for peer_id, producer in producers.items()
                if self._is_active(peer_id, now) and not self._is_tombstoned(producer, now)]
        return LookupResult(self.channels(topic), live)

    def nodes(self, now: float) -> list[Node]:
        """Every live peer with the topics it produces and their tombstone flags."""
        result = []
        for peer_id, peer in self._peers.items():
            if not self._is_active(peer_id, now):
                continue
            topics = sorted(t for t, producers in self._topics.items() if peer_id in producers)
            tombstones = [self._is_tombstoned(self._topics[t][peer_id], now) for t in topics]
            result.append(Node(peer.info, topics, tombstones))
        return result

    def debug_entries(self) -> list[DebugEntry]:
        """Every (registration, producer) pair, tombstones and times included."""
        entries = [DebugEntry(("client", "", ""), p.info, p.last_seen, None) for p in self._peers.values()]
        for topic, producers in self._topics.items():
            for peer_id, producer in producers.items():
                peer = self._peers[peer_id]
                entries.append(DebugEntry(("topic", topic, ""), peer.info, peer.last_seen, producer.tombstoned_at))
        for topic, channels in self._channels.items():
            for channel, peer_ids in channels.items():
                for peer_id in peer_ids:
                    peer = self._peers[peer_id]
                    entries.append(DebugEntry(("channel", topic, channel), peer.info, peer.last_seen, None))
        return entries

    def _is_active(self, peer_id: str, now: float) -> bool:
        return now - self._peers[peer_id].last_seen <= self.inactive_producer_timeout

    def _is_tombstoned(self, producer: _TopicProducer, now: float) -> bool:
        return producer.tombstoned_at is not None and now - producer.tombstoned_at < self.tombstone_lifetime
