"""The replication protocol as a state machine, driven by hypothesis through every order
of events: publishes, channel changes and FINs at owners; frames and ACKs crossing the
links one at a time; links dropped and re-established; backups killed and restarted
with or without their data directory (an emptied backup is sent a snapshot of its
owner's own shard); owners adopted and coming back. After every step, every owner is
in turn supposed killed: its first live backup pulls the other backups' copies, merges
them with its own and delivers what is live.

The pieces under test are nsqd's own: the frame codec, ResendBuffer (what a link keeps
and resends), AckTracker (when a publish is answered), ReplicaStore and Shard (what a
backup keeps, its log replayed after a restart), pull_answer and ReplicaStore.merge
(an adoption), and the ring (who backs up whom, who adopts). Only the sockets are
replaced by in-memory queues.

The properties: a publish is answered OK only once a quorum holds it; were its owner
killed at any moment, the adoption would deliver every publish answered OK to every
channel still owed it, and nothing that was not published; a backup that came back
empty and acknowledged its snapshot holds every live copy its owner had then; an owner
coming back after its adoption learns it from the adopter before delivering anything
(and empties its queues), and every message of the adopted generation it had answered
OK is among those adopted (the fenced backups acknowledge no more of that generation)."""
from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
from collections import deque
from dataclasses import dataclass, field

from hypothesis import settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from nsqd.message import encode_payload
from nsqd.payload_run import PayloadRun
from nsqd.replication import ring, wire
from nsqd.replication.backup_server import pull_answer, shard_frames
from nsqd.replication.generations import Generations
from nsqd.replication.resend import ResendBuffer
from nsqd.replication.store import ReplicaStore
from nsqd.replication.tracker import AckTracker
from nsqd.replication.wire import Kind

TOPICS = ("orders", "audit")
CHANNELS = ("billing", "archive")


@dataclass
class Link:
    """One owner -> backup connection: frames in transit, ACKs coming back."""
    buffer: ResendBuffer
    frames: deque[bytes] = field(default_factory=deque)
    acks: deque[int] = field(default_factory=deque)
    generation: int = 1  # the owner's, said in the HELLO of this connection
    catching_up_until: int | None = None  # the snapshot's SYNCED seq, until acknowledged
    snapshot: set[bytes] = field(default_factory=set)  # the live messages the snapshot held
    closed: bool = False  # the backup closed the connection at HELLO: nothing more is read


@dataclass
class Published:
    owner: str
    topic: str
    owed: set[str] | None  # channels that existed at publish (None: the topic had none)
    generation: int = 1
    acked: bool = False
    adopted: bool = False  # taken over by an adopter: no longer the owner's


class ReplicationMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.root = tempfile.mkdtemp(prefix="replication-model-")
        self.peers: list[str] = []
        self.replicas = 0
        self.stores: dict[str, ReplicaStore] = {}

    def teardown(self) -> None:
        self.loop.close()
        for store in self.stores.values():
            store.close()
        shutil.rmtree(self.root, ignore_errors=True)

    @initialize(nodes=st.integers(2, 4), replicas=st.integers(2, 3))
    def start(self, nodes: int, replicas: int) -> None:
        self.peers = [f"127.0.0.{i + 2}:4153" for i in range(nodes)]
        self.replicas = min(replicas, nodes)
        self.stores = {p: self._store(p) for p in self.peers}
        self.trackers = {p: AckTracker(self.loop.create_future) for p in self.peers}
        self.links = {(o, b): Link(ResendBuffer(1 << 30)) for o in self.peers
                      for b in ring.backups_of(o, self.peers, self.replicas)}
        self.seqs = {p: 0 for p in self.peers}
        self.channels: dict[tuple[str, str], set[str]] = {}  # (owner, topic) -> channels now
        self.published: dict[bytes, Published] = {}
        self.finished: dict[bytes, set[str]] = {}
        self.futures: dict[tuple[str, int], tuple[asyncio.Future[None], list[bytes]]] = {}
        self.wiped: set[tuple[str, str]] = set()  # (owner, backup): the backup lost its copies
        self.own_lost: set[str] = set()  # nodes wiped: their own shard is gone too
        self.caught_up: dict[tuple[str, str], set[bytes]] = {}  # (owner, backup) -> what its snapshot held
        self.gens = {p: Generations.load(self.stores[p].path) for p in self.peers}
        self.adopted: dict[str, set[bytes]] = {p: set() for p in self.peers}
        self.next_id = 0
        # the channels' state beyond FIN, as the owners have it
        self.emptied: set[tuple[bytes, str]] = set()  # (ID, channel): emptied by the owner
        self.dropped: set[bytes] = set()  # emptied from the topic's queue, or the topic deleted
        self.paused: dict[tuple[str, str, str], bool] = {}  # (owner, topic, channel or "") -> paused
        self.due: dict[tuple[bytes, str], int] = {}  # (ID, channel) -> due (ms) of a REQ with a delay
        self.ever_wiped: set[str] = set()  # owners one of whose backups (or itself) lost its copies
        for owner in self.peers:  # "orders" starts with both channels, "audit" with none
            self.channels[(owner, "orders")] = set(CHANNELS)
            self._send(owner, wire.channels("orders", sorted(CHANNELS)), None)

    def _store(self, node: str, load: bool = False) -> ReplicaStore:
        store = ReplicaStore(f"{self.root}/{node}", durable=False)
        store.load()
        return store

    @property
    def wiped_backups_of(self) -> set[str]:
        return {owner for owner, _ in self.wiped}

    # -- the owner's side ---------------------------------------------------------
    def _send(self, owner: str, frame: bytes, seq: int | None) -> None:
        [(decoded, _)] = wire.raw_frames(frame)
        self.stores[owner].apply(owner, decoded, frame)  # the owner's own shard
        self.stores[owner]._write()
        self._to_backups(owner, frame, seq)

    def _to_backups(self, owner: str, frame: bytes, seq: int | None) -> None:
        for backup in ring.backups_of(owner, self.peers, self.replicas):
            link = self.links[(owner, backup)]
            if seq is None:
                link.buffer.keep_after(frame)
            else:
                link.buffer.keep_append(seq, frame)
            link.frames.append(frame)

    @rule(owner=st.integers(0, 3), topic=st.sampled_from(TOPICS), count=st.integers(1, 3))
    def publish(self, owner: int, topic: str, count: int) -> None:
        node = self.peers[owner % len(self.peers)]
        ids = []
        for _ in range(count):
            self.next_id += 1
            ids.append(b"%016x" % self.next_id)
        now = self.channels.get((node, topic), set())
        for msg_id in ids:
            self.published[msg_id] = Published(node, topic, set(now) if now else None, self.gens[node].own)
        self.seqs[node] += 1
        seq = self.seqs[node]
        # as Replicator.replicate: the frame built from the batch nsqd queued (a run for
        # several), which the owner's own shard keeps as one record
        payloads = [encode_payload(i, b"body-" + i, 0) for i in ids]
        batch = PayloadRun.of(payloads) if count > 1 else payloads
        frame = wire.append_fresh(seq, topic, batch, 0)
        self.stores[node].append_own(node, topic, batch, 0, frame)
        self.stores[node]._write()
        self._to_backups(node, frame, seq)
        backups = tuple(ring.backups_of(node, self.peers, self.replicas))
        future = self.trackers[node].add(seq, ring.quorum(self.replicas) - 1, backups, float("inf"))
        self.futures[(node, seq)] = (future, ids)

    @rule(owner=st.integers(0, 3), topic=st.sampled_from(TOPICS), channel=st.sampled_from(CHANNELS),
          add=st.booleans())
    def change_channels(self, owner: int, topic: str, channel: str, add: bool) -> None:
        node = self.peers[owner % len(self.peers)]
        names = self.channels.setdefault((node, topic), set())
        deleted = not add and channel in names
        if add:
            names.add(channel)
            for p in self.published.values():  # what waited in the topic goes to its channels
                if p.owner == node and p.topic == topic and p.owed is None:
                    p.owed = {channel}
        else:
            names.discard(channel)  # deleted: a channel made again later starts empty
            for p in self.published.values():
                if p.owner == node and p.topic == topic and p.owed is not None:
                    p.owed.discard(channel)
            self.emptied = {(i, c) for i, c in self.emptied if c != channel or self.published[i].owner != node}
            self.due = {(i, c): d for (i, c), d in self.due.items() if c != channel or self.published[i].owner != node}
            self.paused.pop((node, topic, channel), None)
        self._send(node, wire.channels(topic, sorted(names)), None)
        if deleted and not names:  # its last channel deleted: what it held goes (the topic queued none)
            self._send(node, wire.empty(topic, "", self._own_ids(node, topic)), None)

    def _own_ids(self, owner: str, topic: str) -> list[bytes]:
        """What the owner's own shard holds of ``topic`` (as ``Replicator._live_ids``)."""
        shard = self.stores[owner].shards.get(owner, {}).get(topic)
        return list(shard.messages) if shard is not None else []

    @rule(owner=st.integers(0, 3), topic=st.sampled_from(TOPICS), channel=st.sampled_from(CHANNELS))
    def empty_channel(self, owner: int, topic: str, channel: str) -> None:
        """/channel/empty: the channel is done with every message it had (the model's
        topic queue holds messages only while the topic has no channel)."""
        node = self.peers[owner % len(self.peers)]
        if channel not in self.channels.get((node, topic), set()):
            return
        for msg_id, p in self.published.items():
            if p.owner == node and p.topic == topic and not p.adopted and p.owed is not None and channel in p.owed:
                self.emptied.add((msg_id, channel))
                self.finished.setdefault(msg_id, set()).add(channel)
        self._send(node, wire.empty(topic, channel, self._own_ids(node, topic)), None)

    @rule(owner=st.integers(0, 3), topic=st.sampled_from(TOPICS), delete=st.booleans())
    def empty_or_delete_topic(self, owner: int, topic: str, delete: bool) -> None:
        """/topic/empty of a topic without channels (all it has is in its queue), or
        /topic/delete: every copy goes (and with a delete, the channels and the pause)."""
        node = self.peers[owner % len(self.peers)]
        if self.channels.get((node, topic)) and not delete:
            return  # the topic's queue is empty: its channels have everything
        for msg_id, p in self.published.items():
            if p.owner == node and p.topic == topic and not p.adopted:
                self.dropped.add(msg_id)
                p.owed = set()
        self._send(node, wire.empty(topic, "", self._own_ids(node, topic)), None)
        if delete:
            self.channels[(node, topic)] = set()
            self.emptied = {(i, c) for i, c in self.emptied if self.published[i].topic != topic
                            or self.published[i].owner != node}
            self.due = {(i, c): d for (i, c), d in self.due.items() if self.published[i].topic != topic
                        or self.published[i].owner != node}
            for key in [k for k in self.paused if k[:2] == (node, topic)]:
                del self.paused[key]
            self._send(node, wire.channels(topic, []), None)
            self._send(node, wire.pause(topic, "", False), None)

    @rule(owner=st.integers(0, 3), topic=st.sampled_from(TOPICS), channel=st.sampled_from(("",) + CHANNELS),
          paused=st.booleans())
    def pause(self, owner: int, topic: str, channel: str, paused: bool) -> None:
        node = self.peers[owner % len(self.peers)]
        if channel and channel not in self.channels.get((node, topic), set()):
            return
        self.paused[(node, topic, channel)] = paused
        self._send(node, wire.pause(topic, channel, paused), None)

    @rule(data=st.data(), due=st.integers(1, 10**13))
    def requeue_with_delay(self, data: st.DataObject, due: int) -> None:
        choices = [(msg_id, c) for msg_id, p in self.published.items() for c in sorted(self._owed(msg_id))]
        if not choices:
            return
        msg_id, channel = data.draw(st.sampled_from(choices))
        p = self.published[msg_id]
        self.due[(msg_id, channel)] = due
        self._send(p.owner, wire.req(p.topic, channel, due, [msg_id]), None)

    @rule(data=st.data())
    def fin(self, data: st.DataObject) -> None:
        choices = [(msg_id, c) for msg_id, p in self.published.items()
                   for c in sorted(self._owed(msg_id))]
        if not choices:
            return
        msg_id, channel = data.draw(st.sampled_from(choices))
        if self.published[msg_id].adopted:
            return
        p = self.published[msg_id]
        self.finished.setdefault(msg_id, set()).add(channel)
        self._send(p.owner, wire.fin(p.topic, channel, [msg_id]), None)

    def _owed(self, msg_id: bytes) -> set[str]:
        """Channels that must still get the message: those it was fanned out to, less the
        channels deleted since and the ones that finished it."""
        p = self.published[msg_id]
        if p.owed is None or p.adopted:
            return set()
        return (p.owed & self.channels.get((p.owner, p.topic), set())) - self.finished.get(msg_id, set())

    # -- the links ----------------------------------------------------------------
    def _link(self, index: int, busy: str = "") -> tuple[tuple[str, str], Link] | None:
        """A link between two live nodes (with something in ``busy``'s queue if named)."""
        live = [(k, v) for k, v in sorted(self.links.items()) if not busy or getattr(v, busy)]
        return live[index % len(live)] if live else None

    @rule(index=st.integers(0, 20), count=st.integers(1, 4))
    def deliver_frames(self, index: int, count: int) -> None:
        for _ in range(count):
            self._deliver_frame(index)

    def _deliver_frame(self, index: int, via: tuple[str, str] | None = None) -> None:
        found = (via, self.links[via]) if via is not None else self._link(index, "frames")
        if found is None:
            return
        (owner, backup), link = found
        raw = link.frames.popleft()
        if link.closed or self.gens[backup].refuses(owner, link.generation):
            link.frames.clear()  # a fenced generation: the backup closed the connection
            return
        [(frame, _)] = wire.raw_frames(raw)
        store = self.stores[backup]
        store.apply(owner, frame, raw)
        store._write()  # the commit before the ACK
        if frame.kind in (Kind.APPEND, Kind.APPEND_RUN, Kind.SYNCED) and frame.seq:
            link.acks.append(frame.seq)

    @rule(index=st.integers(0, 20), count=st.integers(1, 4))
    def deliver_acks(self, index: int, count: int) -> None:
        for _ in range(count):
            self._deliver_ack(index)

    def _deliver_ack(self, index: int, via: tuple[str, str] | None = None) -> None:
        found = (via, self.links[via]) if via is not None else self._link(index, "acks")
        if found is None:
            return
        (owner, backup), link = found
        seq = link.acks.popleft()
        link.buffer.acked(seq)
        if link.catching_up_until is not None:
            if seq < link.catching_up_until:
                return  # a backup catching up counts for no quorum
            link.catching_up_until = None
            if (owner, backup) in self.wiped and owner not in self.own_lost:
                self.wiped.discard((owner, backup))
                self.caught_up[(owner, backup)] = link.snapshot
        self.trackers[owner].acked(backup, seq)
        self._note_acks()

    def _note_acks(self) -> None:
        for key, (future, ids) in list(self.futures.items()):
            if future.done():
                if future.exception() is None:  # else failed: the owner was fenced
                    for msg_id in ids:
                        self.published[msg_id].acked = True
                del self.futures[key]

    @rule(index=st.integers(0, 20))
    def reconnect(self, index: int) -> None:
        """The connection drops (frames and ACKs in transit are lost) and comes back: the
        owner resends what it kept, then the channels as they are now."""
        found = self._link(index)
        if found is None:
            return
        (owner, backup), link = found
        self._connect(owner, backup, link)

    def _connect(self, owner: str, backup: str, link: Link) -> None:
        """HELLO, the resend buffer, the channels; the backup's WELCOME may fence the
        owner or ask for a snapshot (as ``Replicator._welcomed``)."""
        link.acks.clear()
        link.catching_up_until = None
        link.closed = False
        link.generation = self.gens[owner].own
        incarnation = self.gens[owner].incarnation
        gens, store = self.gens[backup], self.stores[backup]
        if store.other_life(owner, link.generation, incarnation) and not gens.refuses(owner, store.generation(owner)):
            # the owner lost its data path: what is held of its former life is fenced for
            # an adoption, and the owner answered nothing
            gens.fence(owner, store.generation(owner))
            link.frames.clear()
            link.closed = True
            return
        if gens.refuses(owner, link.generation):
            link.frames.clear()
            if gens.announced_for(owner) >= link.generation:
                self._fenced(owner, gens.announced_for(owner))
            return
        store.begin(owner, link.generation, incarnation)
        if store.keeps_log(owner) and (owner, backup) in self.wiped and owner not in self.own_lost:
            # the snapshot's SYNCED was written before the connection dropped, its ACK lost:
            # the backup says so in WELCOME and gets no other snapshot
            self.wiped.discard((owner, backup))
            self.caught_up[(owner, backup)] = link.snapshot
        greeting = [wire.channels(t, sorted(c)) for (o, t), c in self.channels.items() if o == owner]
        greeting += [wire.pause(t, c, True) for (o, t, c), p in self.paused.items() if o == owner and p]
        for frame in greeting:  # the owner's own shard learns them too, so a snapshot says them
            [(decoded, _)] = wire.raw_frames(frame)
            self.stores[owner].apply(owner, decoded, frame)
        link.frames = deque(link.buffer.frames() + greeting)
        if not store.keeps_log(owner):
            self.seqs[owner] += 1
            link.catching_up_until = self.seqs[owner]
            own = self.stores[owner]
            link.snapshot = {i for shard in own.shards.get(owner, {}).values() for i in shard.messages}
            link.frames += [wire.reset(), *shard_frames(own, owner), wire.synced(self.seqs[owner])]

    @rule(index=st.integers(0, 20))
    def settle(self, index: int) -> None:
        """Every frame and ACK on one link delivered: a backup that came back empty is
        then caught up."""
        found = self._link(index)
        if found is None:
            return
        key, link = found
        while link.frames or link.acks:
            if link.frames:
                self._deliver_frame(sorted(self.links).index(key), via=key)
            if link.acks:
                self._deliver_ack(sorted(self.links).index(key), via=key)
        if key[0] not in self.own_lost and not self.gens[key[1]].refuses(key[0], link.generation):
            assert key not in self.wiped, f"{key[1]} came back empty and was not caught up by {key[0]}"

    @rule()
    def settle_all(self) -> None:
        """Every link quiet: what the owners did has reached every backup."""
        for key in sorted(self.links):
            self.settle(sorted(self.links).index(key))

    # -- a backup's restart ---------------------------------------------------------
    @rule(node=st.integers(0, 3), wipe=st.booleans())
    def restart_backup(self, node: int, wipe: bool) -> None:
        """A node is killed and comes back, its data directory kept or deleted: as the
        backup of others it restarts from its log (or empty: then the owners it backed
        up have lost a copy, and their own loss would be a second fault)."""
        name = self.peers[node % len(self.peers)]
        self.stores[name].close()
        if wipe:
            shutil.rmtree(f"{self.root}/{name}", ignore_errors=True)
            self.wiped.update((o, name) for o in ring.owners_backed_by(name, self.peers, self.replicas))
            for key in [k for k in self.caught_up if name in k]:
                del self.caught_up[key]
            self.own_lost.add(name)  # as an owner it lost its own shard: a second fault for its backups
            self.ever_wiped.add(name)
            self.ever_wiped.update(ring.owners_backed_by(name, self.peers, self.replicas))
        self.stores[name] = self._store(name, load=True)
        self.gens[name] = Generations.load(self.stores[name].path)
        self.stores[name].begin(name, self.gens[name].own)
        for (owner, backup), link in self.links.items():
            if backup == name:
                self._connect(owner, backup, link)

    # -- an adoption, and the owner's return ------------------------------------------
    @rule(owner=st.integers(0, 3), first=st.integers(0, 3))
    def adopt_and_return(self, owner: int, first: int) -> None:
        """``owner`` is lost: its first live backup fences its generation there and on
        the other backups (PULL), merges their copies, delivers what is live, announces
        the generation and has the others DROP their copies. Then the owner comes back
        with its disk and says HELLO to its backups, ``first`` of them first."""
        node = self.peers[owner % len(self.peers)]
        if node in self.wiped_backups_of:
            return  # a second fault: not modelled here
        backups = ring.backups_of(node, self.peers, self.replicas)
        adopter = backups[0]
        generation = self.stores[adopter].generation(node)
        for backup in backups:
            self.gens[backup].fence(node, generation)
        live = self._adoption(node)
        taken = set(live)
        for msg_id, p in self.published.items():
            if p.owner == node and p.generation <= generation and not p.adopted:
                if p.acked and (p.owed is None or self._owed(msg_id)):
                    assert msg_id in taken, f"acknowledged {msg_id!r} of the adopted generation not adopted"
                p.adopted = True
        self.adopted[node] |= taken
        for backup in backups:
            self.gens[backup].announce(node, generation)
            if self.stores[backup].generation(node) <= generation:
                self.stores[backup].drop(node)
        self.trackers[node].fail_all("restarted")
        self._note_acks()
        order = backups[first % len(backups):] + backups[:first % len(backups)]
        before = self.gens[node].own
        for backup in order:
            self._connect(node, backup, self.links[(node, backup)])
        assert self.gens[node].own > before, "an owner back after its adoption was not told of it"

    def _fenced(self, owner: str, fence: int) -> None:
        """The owner's WELCOME said its generation was adopted: its queues are emptied
        (nothing of them is delivered again), what waits for copies fails, and its links
        start over in the next generation."""
        assert self.gens[owner].superseded_by(fence)
        self.stores[owner].drop(owner)
        self.stores[owner].begin(owner, self.gens[owner].own)
        self.trackers[owner].fail_all("fenced")
        self._note_acks()
        for (o, backup), link in self.links.items():
            if o == owner:
                link.buffer = ResendBuffer(1 << 30)
                link.frames.clear()
                link.acks.clear()
                self._connect(owner, backup, link)

    # -- the property ---------------------------------------------------------------
    def _adoption(self, owner: str) -> dict[bytes, set[str] | None]:
        """What an adoption would deliver if ``owner`` were killed now: its first live
        backup merges its own copies and the other backups' (PULL), then delivers each
        live message to the channels still owed it (None: to the topic)."""
        merged = self._merged(owner)
        delivered: dict[bytes, set[str] | None] = {}
        for topic, shard in merged.shards.get(owner, {}).items():
            for live in shard.live():
                msg_id = live.entry.payload[10:26]
                assert msg_id in self.published, "adoption would deliver a message nobody published"
                assert self.published[msg_id].topic == topic
                delivered[msg_id] = None if live.channels is None else set(live.channels)
        return delivered

    def _merged(self, owner: str) -> ReplicaStore:
        """The adopter's view: its own copies, then the other backups' (PULL)."""
        alive = lambda node: node != owner  # noqa: E731
        adopter = ring.adopter(owner, self.peers, self.replicas, alive)
        assert adopter is not None
        merged = ReplicaStore(f"{self.root}/unused", durable=False)
        for backup in [adopter] + [b for b in ring.backups_of(owner, self.peers, self.replicas) if b != adopter]:
            for raw in pull_answer(self.stores[backup], owner):
                [(frame, _)] = wire.raw_frames(raw)
                assert frame.inner is not None
                merged.merge(owner, frame.inner)
        return merged

    @invariant()
    def an_adoption_reproduces_the_channels_state_once_the_links_are_quiet(self) -> None:
        """Once every frame of an owner reached its backups: an adoption delivers nothing
        it emptied or deleted, pauses what it paused (only), and delays a requeued copy to
        the REQ's due time. (Frames still in transit give duplicates, as a FIN does; a
        backup that lost its copies and was caught up may keep some too.)"""
        if not self.peers:
            return
        for owner in self.peers:
            backups = ring.backups_of(owner, self.peers, self.replicas)
            if owner in self.ever_wiped or any(self.links[(owner, b)].frames for b in backups):
                continue
            if any(self.gens[b].refuses(owner, self.gens[owner].own) for b in backups):
                continue  # adopted, not yet back: its links are closed
            merged = self._merged(owner)
            delivered: dict[bytes, dict[str, int] | None] = {}
            for topic, shard in merged.shards.get(owner, {}).items():
                for live in shard.live():
                    msg_id = live.entry.payload[10:26]
                    delivered[msg_id] = None if live.channels is None else {c: live.due.get(c, 0) for c in live.channels}
                for channel in ("",) + CHANNELS:
                    want = self.paused.get((owner, topic, channel), False)
                    if channel and channel not in self.channels.get((owner, topic), set()):
                        continue
                    assert shard.paused.get(channel, False) == want, f"{topic}/{channel} paused: {want}, adopter: not so"
            for msg_id in self.dropped:
                if self.published[msg_id].owner == owner and not self.published[msg_id].adopted:
                    assert msg_id not in delivered, f"{msg_id!r} emptied from its topic or deleted, adopted"
            for msg_id, channel in self.emptied:
                got = delivered.get(msg_id)
                if self.published[msg_id].owner == owner and not self.published[msg_id].adopted:
                    assert got is None or channel not in got, f"{msg_id!r} emptied from {channel}, adopted for it"
            for (msg_id, channel), due in self.due.items():
                got = delivered.get(msg_id)
                if self.published[msg_id].owner == owner and got is not None and channel in got:
                    assert got[channel] == due, f"{msg_id!r} requeued on {channel} until {due}, adopted due {got[channel]}"

    @invariant()
    def acknowledged_publishes_survive_the_loss_of_their_owner(self) -> None:
        """Checked after every step, for every owner, as if it were killed just then."""
        if not self.peers:
            return
        for owner in self.peers:
            if owner in self.wiped_backups_of:
                continue  # one of its copies is already lost: a second fault
            acked = [(i, p) for i, p in self.published.items() if p.owner == owner and p.acked and not p.adopted]
            if not acked:
                continue
            adopted = self._adoption(owner)
            for msg_id, p in acked:
                if p.owed is None:
                    assert msg_id in adopted, f"acknowledged {msg_id!r} (no channel yet) would be lost"
                    continue
                owed = self._owed(msg_id)
                got = adopted.get(msg_id, set())
                assert got is None or owed <= got, f"acknowledged {msg_id!r} would be lost for {owed - (got or set())}"

    @invariant()
    def a_caught_up_backup_holds_every_live_copy(self) -> None:
        for (owner, backup), held in self.caught_up.items():
            shards = self.stores[backup].shards.get(owner, {})
            for msg_id in held:
                p = self.published[msg_id]
                if p.adopted or (p.owed is not None and not self._owed(msg_id)):
                    continue
                assert msg_id in shards.get(p.topic, _EMPTY).messages, f"caught-up {backup} lacks {msg_id!r}"

    @invariant()
    def a_publish_is_answered_only_with_a_quorum_of_copies(self) -> None:
        for msg_id, p in self.published.items():
            if not p.acked or p.adopted or p.owner in self.wiped_backups_of or (
                    p.owed is not None and not self._owed(msg_id)):
                continue
            holders = 1 + sum(1 for b in ring.backups_of(p.owner, self.peers, self.replicas)
                              if msg_id in self.stores[b].shards.get(p.owner, {}).get(p.topic, _EMPTY).messages)
            assert holders >= ring.quorum(self.replicas), f"{msg_id!r} acknowledged with {holders} copies"


class _Empty:
    messages: dict = {}


_EMPTY = _Empty()

# a longer search: REPLICATION_MODEL_EXAMPLES=5000 pytest tests/broker/test_replication_model.py
EXAMPLES = int(os.environ.get("REPLICATION_MODEL_EXAMPLES", "80"))
ReplicationMachine.TestCase.settings = settings(max_examples=EXAMPLES, stateful_step_count=50, deadline=None)
TestReplicationModel = ReplicationMachine.TestCase
