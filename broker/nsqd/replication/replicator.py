"""Replicated topics on one nsqd: its links to its backups, its listener for the owners
it backs up, the failure detector, and adoption of a lost owner's messages.

nsqd calls ``replicate`` for each publish to a replicated topic (after putting the
messages on its own queues), ``finished`` for each FIN and ``channels_changed`` when a
topic's channels change; adoption puts a lost owner's messages on this node's topics."""
from __future__ import annotations

import asyncio
import itertools
import logging
import time
from typing import TYPE_CHECKING, Any, Sequence

from nsq_protocol.host_port import split_listen_address
from nsq_protocol.names import is_ephemeral

from ..message import Message
from . import ring, wire
from .backup_server import BackupConnection
from .link import PeerLink
from .store import ReplicaStore
from .tracker import AckTracker
from .wire import Frame, Kind

if TYPE_CHECKING:
    from ..nsqd import NSQD

log = logging.getLogger("nsqd")

PULL_TIMEOUT = 5.0  # a survivor's copies it is asked for during an adoption
STARTUP_GRACE = 4  # failover timeouts added, at start, for peers not heard from yet
STARTUP_SILENCE = 2  # failover timeouts a node with an empty data path waits before joining


class Replicator:
    def __init__(self, nsqd: "NSQD") -> None:
        o = nsqd.options
        self.nsqd = nsqd
        self.node = o.replication_address
        self.peers: list[str] = list(o.replication_peers)
        self.replicas = min(o.topic_replicas, len(self.peers))
        self.need = ring.quorum(self.replicas) - 1  # backups that must ack: the owner is one copy
        self.timeout = o.replication_timeout
        self.failover_timeout = o.replication_failover_timeout
        self.ping_interval = min(0.5, self.failover_timeout / 4)
        self.backups = ring.backups_of(self.node, self.peers, self.replicas)
        self.store = ReplicaStore(nsqd.data_path, durable=o.sync_before_ack)
        self.tracker = AckTracker()
        self._seqs = itertools.count(1)
        self.links = {peer: PeerLink(self.node, peer,
                                     max_buffered=o.replication_buffer_bytes,
                                     on_frame=self._from_backup, greeting=self._greeting)
                      for peer in self.backups}
        # every peer pings us through its own link: heard[peer] is when we last heard it.
        # A peer not heard since our start gets STARTUP_GRACE failover timeouts more: in
        # a whole-cluster restart the first nsqd up must not adopt the others' messages.
        assumed = time.monotonic() + STARTUP_GRACE * self.failover_timeout
        self.heard: dict[str, float] = {peer: assumed for peer in self.peers if peer != self.node}
        self.adopted: dict[str, int] = {}  # owner -> messages adopted from it
        self._adopting: set[str] = set()
        self._pulls: dict[int, asyncio.Future[None]] = {}
        self._server: asyncio.AbstractServer | None = None
        self._tick_task: asyncio.Task[None] | None = None
        self._pinger: dict[str, PeerLink] = {}  # links to peers that are not our backups, for liveness

    def replicates(self, topic_name: str) -> bool:
        return self.replicas > 1 and not is_ephemeral(topic_name)

    # -- start and stop -----------------------------------------------------------
    async def start(self) -> None:
        fresh = self.store.fresh()  # no replication state on disk: a new node or a wiped one
        self.store.load()
        loop = asyncio.get_running_loop()
        host, port = split_listen_address(self.node)
        self._server = await loop.create_server(
            lambda: BackupConnection(self.store, self._heard, lambda name: name in self.heard),
            host, port, reuse_address=True)
        log.info("REPLICATION: listening on %s, %d replicas of each topic, backups %s",
                 self.node, self.replicas, ", ".join(self.backups) or "none")
        # every peer must hear from us, backups or not, to know we are alive
        for peer in self.peers:
            if peer == self.node:
                continue
            self._pinger[peer] = self.links.get(peer) or PeerLink(
                self.node, peer, max_buffered=0, on_frame=self._from_backup, greeting=list)
        self._tick_task = self.nsqd.watch(loop.create_task(self._run(silent=fresh)), "REPLICATION: the replication loop")

    async def _run(self, silent: bool) -> None:
        """A node with an empty data path may be a replacement of one whose messages its
        backups hold: it stays silent (its backups' copies are adopted while it is gone)
        for longer than they take to call it lost, then joins."""
        if silent:
            quiet = STARTUP_SILENCE * self.failover_timeout + 2 * self.ping_interval
            log.info("REPLICATION: empty data path: silent for %.1fs so that what a former "
                     "node of this address held is adopted", quiet)
            await asyncio.sleep(quiet)
        for link in self._pinger.values():
            link.start()
        await self._tick()

    async def close(self) -> None:
        if self._tick_task is not None:
            self._tick_task.cancel()
            await asyncio.gather(self._tick_task, return_exceptions=True)
        self.tracker.fail_all("nsqd is stopping")
        for link in self._pinger.values():
            await link.close()
        if self._server is not None:
            self._server.close()
        self.store.close()

    # -- the owner's side -----------------------------------------------------------
    def replicate(self, topic: str, payloads: Sequence[bytes], defer: float) -> "asyncio.Future[None]":
        """Copies of fresh messages to this node's backups; resolves once a quorum holds them."""
        seq = next(self._seqs)
        defer_until = int((time.time() + defer) * 1000) if defer > 0 else 0
        frame = wire.append_fresh(seq, topic, payloads, defer_until)
        for link in self.links.values():
            link.send_append(seq, frame)
        return self.tracker.add(seq, self.need, tuple(self.links), time.monotonic() + self.timeout)

    def finished(self, topic: str, channel: str, ids: list[bytes]) -> None:
        frame = wire.fin(topic, channel, ids)
        for link in self.links.values():
            link.send_after(frame)

    def channels_changed(self, topic: str) -> None:
        frame = self._channels_frame(topic)
        if frame is not None:
            for link in self.links.values():
                link.send_after(frame)

    def _channels_frame(self, topic_name: str) -> bytes | None:
        topic = self.nsqd.topics.get(topic_name)
        if topic is None:
            return None
        return wire.channels(topic_name, [c for c in topic.channels if not is_ephemeral(c)])

    def _greeting(self) -> list[bytes]:
        frames = [self._channels_frame(name) for name in self.nsqd.topics if self.replicates(name)]
        return [f for f in frames if f is not None]

    def _from_backup(self, peer: str, frame: Frame) -> None:
        # a peer is alive when it speaks on its own links (pings), not when it answers
        # ours: a silent replacement answers as a backup and must still count as lost
        if frame.kind is Kind.ACK:
            self.tracker.acked(peer, frame.seq)
        elif frame.kind is Kind.PULLED:
            assert frame.inner is not None
            self.store.merge(frame.name, frame.inner)  # adopted next: never logged here
        elif frame.kind is Kind.DONE:
            waiter = self._pulls.pop(frame.seq, None)
            if waiter is not None and not waiter.done():
                waiter.set_result(None)

    # -- liveness and adoption -----------------------------------------------------------
    def _heard(self, peer: str) -> None:
        if peer in self.heard:
            self.heard[peer] = time.monotonic()  # the start-up grace ends with the first word

    def alive(self, peer: str) -> bool:
        return peer == self.node or time.monotonic() - self.heard.get(peer, 0.0) < self.failover_timeout

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(self.ping_interval)
            for link in self._pinger.values():
                link.ping()
            self.tracker.expire(time.monotonic())
            for owner in list(self.store.shards):
                if owner in self._adopting or self.alive(owner) or not self.store.held(owner):
                    continue
                if ring.adopter(owner, self.peers, self.replicas, self.alive) == self.node:
                    self._adopting.add(owner)
                    self.nsqd.watch(asyncio.get_running_loop().create_task(self._adopt(owner)),
                                    f"REPLICATION: adoption of {owner}")

    async def _adopt(self, owner: str) -> None:
        """``owner`` is lost and we are its first live backup: merge what the other live
        backups hold of it (a quorum ack may have reached only one of them), then deliver
        every message some channel still wants, and forget the copies."""
        try:
            others = [b for b in ring.backups_of(owner, self.peers, self.replicas)
                      if b != self.node and self.alive(b) and b in self._pinger]
            await asyncio.gather(*(self._pull(peer, owner) for peer in others))
            if self.alive(owner):
                log.info("REPLICATION: %s is back before its adoption: nothing adopted", owner)
                return
            count = self._deliver(owner)
            self.adopted[owner] = self.adopted.get(owner, 0) + count
            self.store.drop(owner)
            log.warning("REPLICATION: %s lost: adopted %d of its messages", owner, count)
        except Exception:
            # the copies stay: the next tick tries again (what was put already comes twice)
            log.exception("REPLICATION: adopting the messages of %s failed", owner)
        finally:
            self._adopting.discard(owner)

    async def _pull(self, peer: str, owner: str) -> None:
        seq = next(self._seqs)
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._pulls[seq] = waiter
        self._pinger[peer].send_once(wire.pull(seq, owner))
        try:
            await asyncio.wait_for(waiter, PULL_TIMEOUT)
        except asyncio.TimeoutError:
            log.error("REPLICATION: %s did not send its copies of %s in time: adopting without them", peer, owner)
        finally:
            self._pulls.pop(seq, None)

    def _deliver(self, owner: str) -> int:
        count = 0
        now_ms = time.time() * 1000
        for topic_name, shard in self.store.shards.get(owner, {}).items():
            live = shard.live()
            if not live:
                continue
            topic = self.nsqd.get_topic(topic_name)
            for item in live:
                payload, defer = item.entry.payload, max(0.0, (item.entry.defer_until_ms - now_ms) / 1000)
                if item.channels is None:
                    msg = Message.from_payload(payload)
                    msg.defer = defer
                    topic.put(msg if defer else payload)
                else:
                    for name in item.channels:
                        channel = topic.get_channel(name)
                        if defer:
                            channel.put_deferred(Message.from_payload(payload), defer)
                        else:
                            channel.put(payload)
                count += 1
        return count

    # -- stats ------------------------------------------------------------------------
    def stats(self) -> dict[str, Any]:
        return {
            "node": self.node,
            "replicas": self.replicas,
            "quorum": ring.quorum(self.replicas),
            "waiting_publishes": len(self.tracker),
            "backups": [{"peer": peer, "connected": link.connected, "acked_through": link.unacked.acked_through,
                         "lag_frames": link.lag, "missed_frames": link.unacked.missed, "connects": link.connects}
                        for peer, link in self.links.items()],
            "peers": [{"peer": peer, "alive": self.alive(peer)} for peer in self.peers],
            "held_copies": {owner: self.store.held(owner) for owner in self.store.shards},
            "adopted": dict(self.adopted),
        }

