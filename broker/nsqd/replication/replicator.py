"""Replicated topics on one nsqd: its links to its backups, its listener for the owners
it backs up, the failure detector, adoption of a lost owner's messages
(``adoption.py``), the fence of its own adopted generation, and the snapshots that
catch up a backup that lost what it held.

nsqd calls ``replicate`` for each publish to a replicated topic (after putting the
messages on its own queues), ``finished`` for each FIN, ``channels_changed`` when a
topic's channels change, and ``channel_emptied``, ``topic_emptied``, ``topic_deleted``,
``paused`` and ``requeued`` (a REQ with a delay) for the rest of the channels' state.
Everything sent to the backups is also applied to this node's own shard in the store
(``store.shards[node]``): what is live of its own messages, the source of a catching-up
backup's snapshot."""
from __future__ import annotations

import asyncio
import functools
import itertools
import logging
import time
from typing import TYPE_CHECKING, Any, Iterator, Sequence

from nsq_protocol.host_port import split_listen_address
from nsq_protocol.names import is_ephemeral

from ..message import ID_SLICE, item_payload
from ..options import MAX_TOPIC_REPLICAS
from . import adoption, queued, ring, run_marker, wire
from .backup_server import BackupConnection, BackupSide, shard_frames
from .generations import Generations
from .link import PeerLink
from .membership import Membership, MembershipError
from .store import ReplicaStore
from .topic_counts import TopicCountError, TopicCounts
from .tracker import AckTracker
from .wire import Entry, Frame, Kind

if TYPE_CHECKING:
    from ..nsqd import NSQD
    from ..topic import Topic

log = logging.getLogger("nsqd")

STARTUP_GRACE = 4  # failover timeouts added, at start, for peers not heard from yet
EMPTY_BATCH = 65536  # IDs in one EMPTY frame (1 MiB)
APPEND_BATCH = 500  # messages in one APPEND frame of a topic's queues read back
STARTUP_SILENCE = 2  # failover timeouts a node with an empty data path waits before joining


class _Route:
    """Where one topic's copies go: the first ``count - 1`` backups of the ring."""
    __slots__ = ("links", "peers", "need")

    def __init__(self, links: tuple[PeerLink, ...], count: int) -> None:
        self.links = links
        self.peers = tuple(link.peer for link in links)
        self.need = ring.quorum(count) - 1  # backups that must ack: the owner is one copy


class _Forget:
    """Backups a topic's count no longer uses, told to forget its copies (``ids``, what
    was live when the count changed) once each kept link acknowledged through its seq."""
    __slots__ = ("topic", "removed", "kept", "ids")

    def __init__(self, topic: str, removed: list[PeerLink], kept: dict[PeerLink, int], ids: list[bytes]) -> None:
        self.topic = topic
        self.removed = removed
        self.kept = kept
        self.ids = ids


class _Move:
    """A held topic whose backups changed with the peer list: the backups ``added`` are
    sent a snapshot; those ``removed`` stay in its quorum until every added one holds it."""
    __slots__ = ("added", "removed")

    def __init__(self, added: list[PeerLink], removed: list[PeerLink]) -> None:
        self.added = added
        self.removed = removed


class Replicator:
    def __init__(self, nsqd: "NSQD") -> None:
        o = nsqd.options
        self.nsqd = nsqd
        self.node = o.replication_address
        self.listen_address = o.replication_listen_address
        self.store = ReplicaStore(nsqd.data_path, durable=o.sync_before_ack)
        # the peer list: as given, unless a newer one was set while running (membership.py)
        self.membership = Membership.load(self.store.path, o.replication_peers, o.replication_membership_epoch)
        self._given = (list(o.replication_peers), o.replication_membership_epoch)
        self.peers: list[str] = list(self.membership.peers)
        own_list = self.membership.last_list_of(self.node)
        if own_list is None:
            raise MembershipError(f"{self.node} is in none of the peer lists it knows (left out of the list of "
                                  f"epoch {self.membership.epoch} without a data path that says which it was in)")
        self.timeout = o.replication_timeout
        self.failover_timeout = o.replication_failover_timeout
        self.ping_interval = min(0.5, self.failover_timeout / 4)
        # each topic's count of copies: the default, its flag, or what the HTTP API set
        self.counts = TopicCounts(self.store.path, o.topic_replicas, o.topic_replica_counts, len(own_list))
        self.replicas = self.counts.default
        # a link to every peer that may hold copies of some topic: a topic of count k uses
        # the first k - 1 (so a k = 2 topic's holders are a prefix of a k = 3 topic's),
        # and adoption follows this order whatever the count
        self.widest = min(MAX_TOPIC_REPLICAS, len(own_list))
        self.backups = ring.backups_of(self.node, own_list, self.widest)
        self._routes: dict[str, _Route] = {}
        self.generations = Generations.load(self.store.path)
        if not o.sync_before_ack and run_marker.left_running(self.store.path):
            log.warning("REPLICATION: the last run on this data path did not stop, and what its memory "
                        "queues held is lost here: starting as another life of it, so that the copies "
                        "the backups hold of those messages are adopted")
            self.generations.new_life()
        self.backup_side = BackupSide(self.store, self.generations, self._heard, lambda name: name in self.heard,
                                      asked_to_adopt=self._asked_to_adopt,
                                      membership_heard=self._membership_heard)
        # owner -> (generation, fenced, when): a holder of its copies asked us to adopt
        self._adoption_asked: dict[str, tuple[int, bool, float]] = {}
        self.fenced_at_start = False  # this node's messages were adopted while it was away
        self.silent = False  # started with an empty data path: not talking to peers yet
        self._welcome = asyncio.Event()  # a backup answered HELLO
        self.tracker = AckTracker()
        self._seqs = itertools.count(1)
        self.links = {peer: PeerLink(self.node, peer,
                                     max_buffered=o.replication_buffer_bytes,
                                     on_frame=self._from_backup, on_ack=self._acked,
                                     greeting=functools.partial(self._greeting, peer),
                                     generation=self._generation, incarnation=self.generations.incarnation)
                      for peer in self.backups}
        # every peer pings us through its own link: heard[peer] is when we last heard it.
        # A peer not heard since our start gets STARTUP_GRACE failover timeouts more: in
        # a whole-cluster restart the first nsqd up must not adopt the others' messages.
        assumed = time.monotonic() + STARTUP_GRACE * self.failover_timeout
        self.heard: dict[str, float] = {peer: assumed for peer in self._known_peers() if peer != self.node}
        self.peer_epochs: dict[str, int] = {}  # peer -> its peer list's epoch, from its last PING
        self._moves: dict[str, _Move] = {}  # held topics whose backups changed with the peer list
        self._settled = self.membership.settled.get(self.node, self.membership.epoch)
        self.adopted: dict[str, int] = {}  # owner -> messages adopted from it
        # owner -> (generation, [(topic, seq)]): the frames our last adoption of it sent
        # its messages in, to our backups; once a quorum holds them, a holder that asks
        # us to adopt that generation again is told to DROP its copies
        self.adoptions_sent: dict[str, tuple[int, list[tuple[str, int]]]] = {}
        self._adopting: set[str] = set()
        self.pulls: dict[int, asyncio.Future[None]] = {}
        self.pull_progress: dict[str, float] = {}  # peer -> when it last sent a frame of a PULL's answer
        self._server: asyncio.AbstractServer | None = None
        self._tick_task: asyncio.Task[None] | None = None
        self.pinger: dict[str, PeerLink] = {}  # a link to every peer: our backups' and the others', for liveness
        self._snapshots: set[asyncio.Task[None]] = set()  # being streamed (a reference keeps each alive)
        self._forgets: list[_Forget] = []  # backups a topic's count no longer uses, to forget it
        self._closed = False

    def replicates(self, topic_name: str) -> bool:
        return self.counts.count(topic_name) > 1

    def _route(self, topic: str) -> _Route:
        route = self._routes.get(topic)
        if route is None:
            count = self.counts.count(topic)
            route = self._routes[topic] = _Route(tuple(self.links[p] for p in self.backups[:count - 1]), count)
        return route

    def set_count(self, name: str, count: int) -> bool:
        """``name`` gets ``count`` copies from now on; whether its replication changed.
        While the topic holds messages: a backup added is sent what the topic holds, one
        removed forgets it once the backups kept hold everything sent before the change;
        lowered to 1, every backup forgets it at once and this node its own shard of it
        (its queues hold every message); raised from 1, what its queues hold is read back
        into this node's shard first (``queued.py``), the source of the new backups'
        snapshot. ``TopicCountError`` says why a count is refused."""
        self.counts.check(name, count)
        old = self.counts.count(name)
        topic = self.nsqd.topics.get(name)
        if old == count:
            self.counts.set(name, count)
            return False
        holding = topic is not None and (_holds_messages(topic) or bool(self.store.held_topic(self.node, name)))
        before = self._route(name)
        self.counts.set(name, count)
        self._routes.pop(name, None)
        after = self._route(name)
        self._keep_forgetting(name, after)
        if holding and old == 1:
            assert topic is not None
            self._own_queued(topic)
        if holding:
            self._move_copies(name, before, after)
            if count == 1:  # the last copies beside this node's queues go: its shard of the topic too
                self._forget_own(name)
        elif topic is not None:
            self._reroute_empty(name, [link for link in before.links if link not in after.links],
                                [link for link in after.links if link not in before.links])
            if count == 1:
                self._forget_own(name)
        log.info("REPLICATION: TOPIC(%s): %d replicas (was %d)", name, count, old)
        return True

    def _own_queued(self, topic: "Topic") -> None:
        """A topic of one copy getting more: what its queues hold becomes this node's
        shard of it (its new backups are sent a snapshot of that), with what each
        channel finished and when its deferred messages are due."""
        name = topic.name
        held = queued.read_held(topic)
        self._topic_greeting(name)  # its channels and pauses, in this node's shard
        entries = list(held.messages.values())
        for start in range(0, len(entries), APPEND_BATCH):
            seq = next(self._seqs)
            batch = entries[start:start + APPEND_BATCH]
            self._own(Frame(Kind.APPEND, seq, topic=name, entries=batch), wire.append(seq, name, batch))
        for channel in held.channels:
            for ids in _batches(held.finished(channel)):
                self._own(Frame(Kind.FIN, topic=name, channel=channel, ids=ids), wire.fin(name, channel, ids))
            for due_ms, ids in wire.grouped_by_due(held.due[channel]):
                self._own(Frame(Kind.REQ, topic=name, channel=channel, due_ms=due_ms, ids=ids),
                          wire.req(name, channel, due_ms, ids))
        log.info("REPLICATION: TOPIC(%s): %d messages held with one copy read back from its queues "
                 "to be copied", name, len(entries))

    def _reroute_empty(self, name: str, removed: list[PeerLink], added: list[PeerLink]) -> None:
        """A topic holding no message changed backups: those ``removed`` hold no copy of
        it from now on (they forget its channels and pause), those ``added`` learn them."""
        for link in removed:
            link.send_after(wire.channels(name, []))
            link.send_after(wire.pause(name, "", False))
        greeting = self._topic_greeting(name) if added else []
        for link in added:
            for frame in greeting:
                link.send_after(frame)

    def _forget_own(self, name: str) -> None:
        """This node's shard of a topic gone to one copy: nothing will finish its
        messages there (its FINs are no longer replicated)."""
        self._empty(name, "", self._live_ids(name))  # its route has no backup any more: this node's shard only
        self._own(Frame(Kind.CHANNELS, topic=name), wire.channels(name, []))
        self._own(Frame(Kind.PAUSE, topic=name), wire.pause(name, "", False))

    def _move_copies(self, name: str, before: "_Route", after: "_Route") -> None:
        """A held topic's copies follow its new count. A backup added is resynced: a
        snapshot of this node's shard (the topic's messages, channels and their FINs
        with it), before which its ACKs count in no quorum. A backup removed is told to
        forget the topic once every kept backup acknowledged what was sent before the
        change (until then it is one of the copies that the acknowledged messages have)."""
        for link in after.links:
            if link not in before.links:
                link.resync()
        removed = [link for link in before.links if link not in after.links]
        if removed:
            kept = {link: link.unacked.last_seq for link in after.links}
            self._forgets.append(_Forget(name, removed, kept, self._live_ids(name)))
            self._forget_when_held()

    def _keep_forgetting(self, name: str, route: "_Route") -> None:
        """A backup the topic's new count uses again is no longer to forget it."""
        for forget in self._forgets:
            if forget.topic == name:
                forget.removed = [link for link in forget.removed if link not in route.links]
        self._forgets = [forget for forget in self._forgets if forget.removed]

    def _forget_when_held(self) -> None:
        for forget in list(self._forgets):
            if any(link.unacked.acked_through < seq for link, seq in forget.kept.items()):
                continue
            self._forgets.remove(forget)
            frames = [wire.empty(forget.topic, "", batch) for batch in _batches(forget.ids)]
            frames += [wire.channels(forget.topic, []), wire.pause(forget.topic, "", False)]
            for link in forget.removed:
                for frame in frames:
                    link.send_after(frame)
            log.info("REPLICATION: TOPIC(%s): %s forget its copies", forget.topic,
                     ", ".join(link.peer for link in forget.removed))

    def topic_gone(self, name: str) -> None:
        """A deleted topic: made again later, it gets the default count unless told."""
        self.counts.forget(name)
        self._routes.pop(name, None)

    # -- the peer list changing while running (membership.py) --------------------
    def _known_peers(self) -> list[str]:
        """Every peer of every list kept: a former one may still send its HELLO and PINGs."""
        return list(dict.fromkeys(p for e in sorted(self.membership.history) for p in self.membership.history[e]))

    def _pinger_link(self, peer: str) -> PeerLink:
        return PeerLink(self.node, peer, max_buffered=0, on_frame=self._from_backup, on_ack=self._acked,
                        greeting=list, generation=self._generation, incarnation=self.generations.incarnation)

    def _backup_link(self, peer: str) -> PeerLink:
        return PeerLink(self.node, peer, max_buffered=self.nsqd.options.replication_buffer_bytes,
                        on_frame=self._from_backup, on_ack=self._acked,
                        greeting=functools.partial(self._greeting, peer),
                        generation=self._generation, incarnation=self.generations.incarnation)

    def change_membership(self, peers: Sequence[str], epoch: int, started: bool = True) -> bool:
        """The peer list of ``epoch`` replaces the current one; whether it changed. This
        node's held topics whose backups change send the new ones a snapshot and keep the
        old ones in their quorum until it is held (then the old ones forget the topic);
        a node left out keeps its own backups (its copies are adopted once it is gone)
        and adopts nothing. ``MembershipError`` says why a list is refused."""
        peers = list(peers)
        if self.node in peers:
            if self.counts.widest() > len(peers):
                raise MembershipError(f"{len(peers)} peers cannot hold the {self.counts.widest()} copies "
                                      f"some topic has")
        names = {n for n in self.nsqd.topics if not is_ephemeral(n)} | set(self.store.shards.get(self.node, {}))
        before = {name: self._route(name) for name in names if self.replicates(name)}
        self.membership.settled[self.node] = self._settled  # kept with the new list: a restart reads it
        if not self.membership.change(peers, epoch):
            return False
        self.peers = peers
        now = time.monotonic()
        for peer in self._known_peers():
            if peer != self.node and peer not in self.heard:  # a new peer: the start-up grace
                self.heard[peer] = now + STARTUP_GRACE * self.failover_timeout
        if self.node in peers:
            self.counts.peers = len(peers)
            self.widest = min(MAX_TOPIC_REPLICAS, len(peers))
            self.backups = ring.backups_of(self.node, peers, self.widest)
            for peer in self.backups:
                if peer not in self.links:
                    self._replace_pinger(peer, self._backup_link(peer), started)
        for peer in peers:
            if peer != self.node and peer not in self.pinger:
                self._replace_pinger(peer, self._pinger_link(peer), started)
        self._routes.clear()
        for name, old in before.items():
            self._move_route(name, old, self._route(name))
        if not self._moves:
            self._settle()
        log.warning("REPLICATION: peer list of epoch %d: %s; backups %s, %d topics moving", epoch,
                    ", ".join(peers), ", ".join(self.backups) or "none", len(self._moves))
        return True

    def _replace_pinger(self, peer: str, link: PeerLink, started: bool) -> None:
        old = self.pinger.get(peer)
        if old is not None and old is not self.links.get(peer):
            self.nsqd.watch(asyncio.get_running_loop().create_task(old.close()), f"REPLICATION: closing {peer}")
        if link.max_buffered:
            self.links[peer] = link
        self.pinger[peer] = link
        if started and not self.silent:
            link.start()

    def _move_route(self, name: str, before: _Route, after: _Route) -> None:
        added = [link for link in after.links if link not in before.links]
        removed = [link for link in before.links if link not in after.links]
        if not added and not removed:
            return
        held = bool(self.store.held_topic(self.node, name))
        topic = self.nsqd.topics.get(name)
        if not held and not (topic is not None and _holds_messages(topic)):
            if topic is not None:
                self._reroute_empty(name, removed, added)
            return
        for link in added:
            link.resync()
        prior = self._moves.get(name)  # a move not over yet: its new backups must still catch up
        if prior is not None:
            added += [link for link in prior.added if link in after.links and link not in added]
        # until the new backups hold the snapshot, the old ones count for the quorum too
        self._routes[name] = _Route((*after.links, *removed), self.counts.count(name))
        self._moves[name] = _Move(added, removed)

    def _finish_moves(self) -> None:
        """A moving topic whose new backups all hold their snapshot leaves its old ones
        (told to forget it once the new ones acknowledged what was sent before)."""
        for name, move in list(self._moves.items()):
            if not all(link.holds_snapshot for link in move.added):
                continue
            del self._moves[name]
            before = self._routes.pop(name, None)
            after = self._route(name)
            if move.removed and before is not None:
                kept = {link: link.unacked.last_seq for link in after.links}
                self._forgets.append(_Forget(name, [l for l in move.removed if l not in after.links], kept,
                                             self._live_ids(name)))
            log.info("REPLICATION: TOPIC(%s): its copies moved to %s", name, ", ".join(after.peers))
        if not self._moves and self._settled != self.membership.epoch:
            self._settle()

    def _drop_departed(self) -> None:
        """Links to peers left out of the list, once they are gone and nothing is still
        to be sent to them (their reconnection attempts would go on for ever)."""
        waiting = {link for forget in self._forgets for link in forget.removed}
        waiting |= {link for move in self._moves.values() for link in move.removed}
        for peer, link in list(self.pinger.items()):
            if peer in self.peers or peer in self.backups or link in waiting or self.alive(peer):
                continue
            del self.pinger[peer]
            self.links.pop(peer, None)
            self.nsqd.watch(asyncio.get_running_loop().create_task(link.close()), f"REPLICATION: closing {peer}")
            log.info("REPLICATION: %s left the peer list and is gone: link closed", peer)

    @property
    def settled_epoch(self) -> int:
        """The epoch since which every held topic's copies sit on its backups of that list."""
        return self._settled

    def _settle(self) -> None:
        self._settled = self.membership.epoch
        self.membership.heard_settled(self.node, self._settled)
        log.info("REPLICATION: settled at epoch %d: every held topic's copies are on its backups", self._settled)

    def _membership_heard(self, peer: str, epoch: int, settled: int) -> None:
        self.peer_epochs[peer] = epoch
        if epoch:
            self.membership.heard_settled(peer, settled)

    def _lists_agree(self) -> bool:
        """Every peer heard lately runs our peer list's epoch: only then may an adoption
        decide who adopts and which peers hold copies (both follow the list)."""
        return all(self.peer_epochs.get(peer, 0) == self.membership.epoch
                   for peer in self.heard if peer in self.peers and self.alive(peer))

    def _owner_ring(self, owner: str) -> list[str] | None:
        """The list whose ring names ``owner``'s adopter: the current one, or for a
        former member the last one it was in."""
        return self.peers if owner in self.peers else self.membership.last_list_of(owner)

    def _adopter_of(self, owner: str) -> str | None:
        peers = self._owner_ring(owner)
        if peers is None:
            return None
        return ring.adopter(owner, peers, MAX_TOPIC_REPLICAS, lambda p: p in self.peers and self.alive(p))

    def holders_of(self, owner: str, copies: int | None = None) -> list[str]:
        """The peers that may hold copies of ``owner``'s acknowledged messages."""
        return self.membership.holders(owner, copies or MAX_TOPIC_REPLICAS)

    # -- start and stop -----------------------------------------------------------
    async def start(self) -> None:
        """Listen for owners; then, unless the data path is new, learn from the backups
        whether this node's messages were adopted while it was away (``fenced_at_start``:
        nsqd then empties what it loads of replicated topics) before nsqd serves clients."""
        fresh = self.store.fresh()  # no replication state on disk: a new node or a wiped one
        self.store.load()
        run_marker.mark_running(self.store.path)
        self.store.begin(self.node, self.generations.own)
        loop = asyncio.get_running_loop()
        listen = self.listen_address or self.node
        host, port = split_listen_address(listen)
        try:
            self._server = await loop.create_server(lambda: BackupConnection(self.backup_side),
                                                    host, port, reuse_address=True)
        except OSError as error:
            hint = "" if self.listen_address else " (--replication-listen-address binds another address)"
            raise OSError(error.errno, f"replication listener on {listen}: {error.strerror or error}{hint}") from error
        log.info("REPLICATION: listening on %s, %d replicas of a topic by default, backups %s, generation %d",
                 self.node, self.replicas, ", ".join(self.backups) or "none", self.generations.own)
        # every peer must hear from us, backups or not, to know we are alive
        for peer in [*self.peers, *self.backups]:
            if peer != self.node and peer not in self.pinger:
                self.pinger[peer] = self.links.get(peer) or self._pinger_link(peer)
        if self._settled < self.membership.epoch:
            # stopped while its copies moved: settled again only once every backup of a
            # held topic holds them (those it left keep theirs: duplicates, not loss)
            for name in set(self.store.shards.get(self.node, {})):
                if self.replicates(name) and self.store.held_topic(self.node, name):
                    self._moves[name] = _Move(list(self._route(name).links), [])
        peers, epoch = self._given
        if epoch > self.membership.epoch:  # the list changed while this node was down
            self.change_membership(peers, epoch, started=False)
        if not fresh:
            before = self.generations.own
            for link in self.pinger.values():
                link.start()
            await self._hear_backups()
            self.fenced_at_start = self.generations.own != before
        self._tick_task = self.nsqd.watch(loop.create_task(self._run(silent=fresh)), "REPLICATION: the replication loop")

    async def _hear_backups(self) -> None:
        """Until every backup answered our HELLO (one that adopted us says so), at most a
        failover timeout: a backup still down cannot tell, one adopting says nothing yet."""
        deadline = time.monotonic() + self.failover_timeout
        while not all(link.welcomed == self.generations.own for link in self.links.values()):
            self._welcome.clear()
            try:
                await asyncio.wait_for(self._welcome.wait(), deadline - time.monotonic())
            except asyncio.TimeoutError:
                break
        else:
            return
        log.warning("REPLICATION: started without an answer from %s", ", ".join(
            p for p, link in self.links.items() if link.welcomed != self.generations.own))

    async def _run(self, silent: bool) -> None:
        """A node with an empty data path may be a replacement of one whose messages its
        backups hold: it stays silent (its backups' copies are adopted while it is gone)
        for longer than they take to call it lost, then joins."""
        if silent:
            quiet = STARTUP_SILENCE * self.failover_timeout + 2 * self.ping_interval
            log.info("REPLICATION: empty data path: silent for %.1fs so that what a former "
                     "node of this address held is adopted", quiet)
            self.silent = True
            await asyncio.sleep(quiet)
            self.silent = False
            log.info("REPLICATION: silence over: connecting to the peers")
            for link in self.pinger.values():
                link.start()
        await self._tick()

    async def forget_topic(self, name: str) -> None:
        """A topic handed off to other nsqds (a scale-down's drain): its backups forget it,
        and this returns once a quorum of them acknowledged that (an empty APPEND after
        the forget: ACKs come in order), so that its copies are not adopted as well."""
        if not self.replicates(name):
            return
        self.topic_deleted(name)
        await self.replicate_entries(name, [])[1]

    def stopped_cleanly(self) -> None:
        """nsqd wrote every queue to disk: the next start is the same life of this data path."""
        run_marker.mark_stopped(self.store.path)

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._tick_task is not None:
            self._tick_task.cancel()
            await asyncio.gather(self._tick_task, return_exceptions=True)
        self.tracker.fail_all("nsqd is stopping")
        for link in self.pinger.values():
            await link.close()
        if self._server is not None:
            self._server.close()
        self.store.close()

    # -- the owner's side -----------------------------------------------------------
    def next_seq(self) -> int:
        return next(self._seqs)

    def _generation(self) -> int:
        return self.generations.own

    def replicate(self, topic: str, payloads: Sequence[bytes], defer: float) -> "asyncio.Future[None]":
        """Copies of fresh messages to this node's backups; resolves once a quorum holds them."""
        seq = next(self._seqs)
        defer_until = int((time.time() + defer) * 1000) if defer > 0 else 0
        frame = wire.append_fresh(seq, topic, payloads, defer_until)
        self.store.append_own(self.node, topic, payloads, defer_until, frame)
        self.store.write_soon()
        return self._send_append(topic, seq, frame)

    def replicate_entries(self, topic: str, entries: list[Entry]) -> tuple[int, "asyncio.Future[None]"]:
        """Copies of messages this node took over (each keeps its due time): the seq
        they were sent with, and what resolves once a quorum holds them."""
        seq = next(self._seqs)
        frame = wire.append(seq, topic, entries)
        self._own(Frame(Kind.APPEND, seq, topic=topic, entries=entries), frame)
        return seq, self._send_append(topic, seq, frame)

    def quorum_holds(self, topic: str, seq: int) -> bool:
        """Whether enough of ``topic``'s backups acknowledged every frame up to ``seq``
        for a quorum, this node being one copy (ACKs are cumulative)."""
        route = self._route(topic)
        return self.tracker.holding(seq, route.peers) >= route.need

    def _send_append(self, topic: str, seq: int, frame: bytes) -> "asyncio.Future[None]":
        route = self._route(topic)
        for link in route.links:
            link.send_append(seq, frame)
        return self.tracker.add(seq, route.need, route.peers, time.monotonic() + self.timeout)

    def finished(self, topic: str, channel: str, ids: list[bytes]) -> None:
        frame = wire.fin(topic, channel, ids)
        self._own(Frame(Kind.FIN, topic=topic, channel=channel, ids=ids), frame)
        for link in self._route(topic).links:
            link.send_after(frame)

    def channels_changed(self, topic: str) -> None:
        names = self._channel_names(topic)
        if names is not None:
            self._send(Frame(Kind.CHANNELS, topic=topic, channels=names), wire.channels(topic, names))
            if not names:  # its last channel deleted: what that held goes, what the topic's queue holds stays
                queued = _queued_ids(self.nsqd.topics[topic])
                if queued is not None:
                    spared = set(queued)
                    self._empty(topic, "", [i for i in self._live_ids(topic) if i not in spared])

    def _send(self, frame: Frame, raw: bytes) -> None:
        """A change of the channels' state, to the backups in order with the messages."""
        self._own(frame, raw)
        for link in self._route(frame.topic).links:
            link.send_after(raw)

    def _empty(self, topic: str, channel: str, ids: list[bytes]) -> None:
        for batch in _batches(ids):
            self._send(Frame(Kind.EMPTY, topic=topic, channel=channel, ids=batch), wire.empty(topic, channel, batch))

    def _live_ids(self, topic: str) -> list[bytes]:
        """This node's live messages of ``topic``, from its own shard."""
        shard = self.store.shards.get(self.node, {}).get(topic)
        return shard.ids() if shard is not None else []

    def channel_emptied(self, topic: "Topic", channel: str) -> None:
        """``channel`` is about to be emptied: it is done with every live message but
        those still in the topic's own queue (it gets them later)."""
        queued = _queued_ids(topic)
        if queued is None:
            log.warning("REPLICATION: TOPIC(%s): channel %s emptied while the topic's queue holds messages "
                        "on disk: its backups keep the channel's copies (duplicates after a failover)",
                        topic.name, channel)
            return
        spared = set(queued)
        self._empty(topic.name, channel, [i for i in self._live_ids(topic.name) if i not in spared])

    def topic_emptied(self, topic: "Topic") -> None:
        """The topic's own queue is about to be emptied (its channels keep theirs)."""
        if not self._channel_names(topic.name):  # no channel was given any: all are in the topic's queue
            self._empty(topic.name, "", self._live_ids(topic.name))
            return
        queued = _queued_ids(topic)
        if queued is None:
            log.warning("REPLICATION: TOPIC(%s): emptied while its queue holds messages on disk: its "
                        "backups keep their copies of those (duplicates after a failover)", topic.name)
            queued = [item_payload(item)[ID_SLICE] for item in topic.memory]
        self._empty(topic.name, "", queued)

    def topic_deleted(self, name: str) -> None:
        """Every copy of the topic goes, with its channels and its pause."""
        self._empty(name, "", self._live_ids(name))
        self._send(Frame(Kind.CHANNELS, topic=name), wire.channels(name, []))
        self._send(Frame(Kind.PAUSE, topic=name), wire.pause(name, "", False))

    def paused(self, topic: str, channel: str, paused: bool) -> None:
        self._send(Frame(Kind.PAUSE, topic=topic, channel=channel, paused=paused),
                   wire.pause(topic, channel, paused))

    def requeued(self, topic: str, channel: str, msg_id: bytes, due: float) -> None:
        due_ms = int(due * 1000)
        self._send(Frame(Kind.REQ, topic=topic, channel=channel, due_ms=due_ms, ids=[msg_id]),
                   wire.req(topic, channel, due_ms, [msg_id]))

    def _own(self, frame: Frame, raw: bytes) -> None:
        """This node's own shard: what is live of its messages, logged like a backup's
        copies (without waiting for the commit), for the snapshots of its backups."""
        self.store.apply(self.node, frame, raw)
        self.store.write_soon()

    def _channel_names(self, topic_name: str) -> list[str] | None:
        topic = self.nsqd.topics.get(topic_name)
        if topic is None:
            return None
        return [c for c in topic.channels if not is_ephemeral(c)]

    def _greeting(self, peer: str) -> list[bytes]:
        """What a fresh connection to ``peer`` starts with: the channels (and pauses) of
        the topics whose copies it holds."""
        out = []
        for name in list(self.nsqd.topics):
            if self.replicates(name) and peer in self._route(name).peers:
                out += self._topic_greeting(name)
        return out

    def _topic_greeting(self, name: str) -> list[bytes]:
        names = self._channel_names(name)
        if names is None:
            return []
        out = [wire.channels(name, names)]
        self._own(Frame(Kind.CHANNELS, topic=name, channels=names), out[-1])
        # what is paused too: a backup whose copies were dropped (this node's
        # generation moved on) or a new one learns it here
        topic = self.nsqd.topics[name]
        for channel in [""] * topic.paused + [c for c in names if topic.channels[c].paused]:
            out.append(wire.pause(name, channel, True))
            self._own(Frame(Kind.PAUSE, topic=name, channel=channel, paused=True), out[-1])
        return out

    def _from_backup(self, peer: str, frame: Frame) -> None:
        # a peer is alive when it speaks on its own links (pings), not when it answers
        # ours: a silent replacement answers as a backup and must still count as lost
        if frame.kind is Kind.WELCOME:
            self._welcomed(peer, frame)
        elif frame.kind is Kind.PULLED:
            assert frame.inner is not None
            self.store.merge(frame.name, frame.inner)  # adopted next: never logged here
            self.pull_progress[peer] = time.monotonic()
        elif frame.kind is Kind.DONE:
            waiter = self.pulls.pop(frame.seq, None)
            if waiter is not None and not waiter.done():
                waiter.set_result(None)

    def _acked(self, peer: str, seq: int) -> None:
        link = self.links.get(peer)
        if link is not None and link.counts_for(seq):
            self.tracker.acked(peer, seq)

    # -- generations and snapshots ------------------------------------------------------
    def _welcomed(self, peer: str, frame: Frame) -> None:
        self._welcome.set()
        if self.generations.superseded_by(frame.generation):
            self._fenced(peer, frame.generation)
            return
        link = self.links.get(peer)
        if link is not None and link.needs_snapshot(frame.keeps_log):
            held = [topic for topic in self.store.shards.get(self.node, {}) if peer in self._route(topic).peers]
            snapshot = itertools.chain((wire.reset(),), shard_frames(self.store, self.node, held))
            log.info("REPLICATION: %s holds nothing of ours or missed frames: sending a snapshot "
                     "of %d live messages", peer, self.store.held(self.node))
            self._snapshots.add(asyncio.get_running_loop().create_task(self._stream_snapshot(link, snapshot)))

    async def _stream_snapshot(self, link: PeerLink, frames: Iterator[bytes]) -> None:
        try:
            await link.stream_snapshot(frames, lambda: next(self._seqs))
        except Exception:
            # the backup stays catching up: its next connection is sent a snapshot again
            log.exception("REPLICATION: sending a snapshot to %s failed", link.peer)
            link.drop_connection()
        finally:
            self._snapshots.discard(asyncio.current_task())  # type: ignore[arg-type]

    def _fenced(self, peer: str, fence: int) -> None:
        """Our messages up to generation ``fence`` were adopted (``peer`` says so): what
        our replicated topics hold is not delivered again here, what waits for copies
        fails, and the links start over in the new generation."""
        log.warning("REPLICATION: %s says our messages of generation %d were adopted: emptying our "
                    "replicated topics, now generation %d", peer, fence, self.generations.own)
        for topic in list(self.nsqd.topics.values()):
            if topic.replicated:
                self.empty(topic)
        self.tracker.fail_all("this node's messages were adopted by a peer")
        self.store.drop(self.node)
        self.store.begin(self.node, self.generations.own)
        for link in self.pinger.values():
            link.new_generation()

    @staticmethod
    def empty(topic: "Topic") -> None:
        topic.empty()
        for channel in topic.channels.values():
            channel.empty()

    # -- liveness and adoption -----------------------------------------------------------
    def _heard(self, peer: str) -> None:
        if peer in self.heard:
            self.heard[peer] = time.monotonic()  # the start-up grace ends with the first word

    def _not_listening(self, late: float) -> None:
        """This node itself did not run for ``late`` seconds (a stalled loop, a process
        stopped, a VM suspended: its monotonic clock jumped on): a peer's silence counts
        only for the time we were listening, so that its pings, still unread in our
        sockets, are not taken for its loss."""
        if late > 0:
            for peer in self.heard:
                self.heard[peer] += late

    def alive(self, peer: str) -> bool:
        return peer == self.node or time.monotonic() - self.heard.get(peer, 0.0) < self.failover_timeout

    async def _tick(self) -> None:
        last = time.monotonic()
        while True:
            await asyncio.sleep(self.ping_interval)
            now = time.monotonic()
            self._not_listening(now - last - self.ping_interval)
            last = now
            self.tracker.expire(time.monotonic())
            self._finish_moves()
            self._forget_when_held()
            self._drop_departed()
            asks = self._adoptions_due()
            for peer, link in self.pinger.items():
                link.ping(asks.get(peer, ()), self.membership.epoch, self._settled)
            self._adopt_when_asked(now)

    def _adoptions_due(self) -> dict[str, list[wire.AdoptRequest]]:
        """Adopt the lost owners whose copies we hold and whose first live backup we are;
        for the others, what to ask their first live backup (peer -> requests): it may
        hold nothing of them (wiped while they were lost), and then only our asking
        makes it adopt."""
        asks: dict[str, list[wire.AdoptRequest]] = {}
        for owner in list(self.store.shards):
            if owner == self.node or owner in self._adopting or not self.store.held(owner):
                continue
            # copies of a generation fenced here belong to an adoption that began: if
            # its adopter died before announcing it, the first live backup finishes it
            # (the owner's HELLO in that generation is refused until then)
            generation = self.store.generation(owner)
            begun = self.generations.refuses(owner, generation)
            if self.alive(owner) and not begun:
                continue
            if not self._lists_agree():
                continue  # a peer list is changing: who adopts and who holds copies may differ
            # the owner may have got its quorum from any one of its backups: an
            # adoption must fence every one of them, or a partition's far side goes
            # on acknowledging what the adoption lacks (and its owner empties it once
            # it learns of the adoption). A backup unreachable too: wait for it.
            copies = max([self.replicas, *(self.counts.count(t) for t in self.store.shards.get(owner, {}))])
            if not begun and not all(self.alive(b) for b in self.holders_of(owner, copies)):
                continue
            # whatever a topic's count, its holders are a prefix of the owner's ring:
            # the first live one of the widest ring holds every topic any live one does
            adopter = self._adopter_of(owner)
            if adopter == self.node:
                self._start_adoption(owner)
            elif adopter is not None:
                asks.setdefault(adopter, []).append(wire.AdoptRequest(owner, generation, begun))
        return asks

    def _asked_to_adopt(self, holder: str, requests: list[wire.AdoptRequest]) -> None:
        now = time.monotonic()
        for request in requests:
            self._adoption_asked[request.owner] = (request.generation, request.fenced, now)
            self._drop_if_adopted(holder, request.owner, request.generation)

    def _drop_if_adopted(self, holder: str, owner: str, generation: int) -> None:
        """A holder asks us to adopt copies of a generation we adopted already: it missed
        the adoption's DROP (cut off before the adopted messages had their quorum, which
        then was not waited for, or down when it was sent). Once a quorum of our backups
        holds what we adopted, its copies are not needed and would be adopted a second
        time should we be lost: it is told DROP (until then it asks at every ping)."""
        sent = self.adoptions_sent.get(owner)
        if sent is None or sent[0] < generation or self.generations.announced_for(owner) < sent[0]:
            return
        if all(self.quorum_holds(topic, seq) for topic, seq in sent[1]):
            link = self.pinger.get(holder)
            if link is not None:
                log.info("REPLICATION: %s still holds copies of %s (generation %d) adopted here: DROP",
                         holder, owner, generation)
                link.send_once(wire.drop(owner, sent[0]))

    def _adopt_when_asked(self, now: float) -> None:
        """A holder asked us to adopt an owner: we do if the holder fenced its generation
        (an adoption began, or the owner came back as another life: what we hold of it,
        say its new life's first publishes, is adopted with the rest), or if we hold
        nothing of it and we too find it lost (what we hold is decided on above); and
        only as its first live backup. The adoption pulls the holder's copies."""
        for owner, (generation, fenced, at) in list(self._adoption_asked.items()):
            if now - at > 3 * self.ping_interval:  # no longer asked: adopted, or the owner is back
                del self._adoption_asked[owner]
                continue
            if owner == self.node or owner in self._adopting:
                continue
            if self.generations.announced_for(owner) >= generation:
                continue  # adopted here already: the holder is told DROP once a quorum holds it (above)
            if not fenced and (self.store.held(owner) or self.alive(owner) or not all(
                    self.alive(b) for b in self.holders_of(owner, self.replicas))):
                continue
            if self._lists_agree() and self._adopter_of(owner) == self.node:
                log.warning("REPLICATION: adopting %s's messages (generation %d) as a backup holding "
                            "them asked", owner, generation)
                self._start_adoption(owner, generation)

    def _start_adoption(self, owner: str, generation: int = 0) -> None:
        self._adopting.add(owner)
        self.nsqd.watch(asyncio.get_running_loop().create_task(self._adopt(owner, generation)),
                        f"REPLICATION: adoption of {owner}")

    async def _adopt(self, owner: str, generation: int = 0) -> None:
        """``owner`` is lost and we are its first live backup (``adoption.py``)."""
        try:
            await adoption.adopt(self, owner, generation)
        except Exception:
            # the copies stay: the next tick tries again (what was put already comes twice)
            log.exception("REPLICATION: adopting the messages of %s failed", owner)
        finally:
            self._adopting.discard(owner)

    # -- stats ------------------------------------------------------------------------
    def stats(self) -> dict[str, Any]:
        topics = {name: self.counts.count(name) for name in self.nsqd.topics if not is_ephemeral(name)}
        widest = max([self.replicas, *topics.values()])  # the backups some topic here uses
        return {
            "node": self.node,
            "replicas": self.replicas,
            "quorum": ring.quorum(self.replicas),
            "topic_replicas": topics,
            "waiting_publishes": len(self.tracker),
            "generation": self.generations.own,
            "silent": self.silent,
            "live_own": self.store.held(self.node),
            "backups": [{"peer": peer, "connected": link.connected, "state": link.state,
                         "acked_through": link.unacked.acked_through,
                         "lag_frames": link.lag, "missed_frames": link.unacked.missed, "connects": link.connects}
                        for peer, link in self.links.items() if peer in self.backups[:widest - 1]],
            "peers": [{"peer": peer, "alive": self.alive(peer)} for peer in self.peers],
            "membership": {"epoch": self.membership.epoch, "settled": self._settled,
                           "moving_topics": sorted(self._moves),
                           "peer_epochs": {p: self.peer_epochs.get(p, 0) for p in self.peers if p != self.node}},
            "held_copies": {owner: self.store.held(owner) for owner in self.store.shards if owner != self.node},
            "held_topics": {owner: {topic: len(shard) for topic, shard in shards.items() if len(shard)}
                            for owner, shards in self.store.shards.items() if owner != self.node},
            "adopted": dict(self.adopted),
            "fenced": dict(self.generations.announced),
            "clock_offsets_ms": dict(self.backup_side.clock_offsets),
        }


def _batches(ids: list[bytes]) -> Iterator[list[bytes]]:
    """``ids`` in EMPTY frames' worth: a frame stays far below wire.MAX_FRAME."""
    for start in range(0, len(ids), EMPTY_BATCH):
        yield ids[start:start + EMPTY_BATCH]


def _holds_messages(topic: "Topic") -> bool:
    return bool(topic.depth) or any(c.depth or len(c.in_flight) or len(c.deferred) for c in topic.channels.values())


def _queued_ids(topic: "Topic") -> list[bytes] | None:
    """The IDs of what waits in the topic's own queue for its channels, or None when
    some of it is on disk (not read back to say which)."""
    if topic.backend.depth:
        return None
    return [item_payload(item)[ID_SLICE] for item in topic.memory]
