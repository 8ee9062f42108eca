"""Adopting a lost owner's messages, in this order:

1. fence the generation of its copies here, and on every other live backup by the PULL
   that asks for theirs: from then on none of them acknowledges a frame of that
   generation, so the merged copies hold every message the owner got a quorum for;
2. put every message some channel still owes on this node's topics and channels, and
   replicate them to this node's backups as its own messages (with FINs for this
   node's channels they are not owed to);
3. announce the generation (an owner coming back learns it in WELCOME and empties its
   queues) and forget the copies;
4. once a quorum of this node's backups holds what was adopted, tell the other backups
   to DROP theirs: a second loss is then survived by this node's backups, without the
   lost owner's copies delivered a second time. A backup that missed it (cut off before
   that quorum, which the adoption waits for only ``--replication-timeout``, or down)
   asks this node to adopt the copies it still holds, and is then told DROP as soon as
   the quorum is there (``Replicator._drop_if_adopted``).
"""
from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING

from nsq_protocol.names import is_ephemeral

from ..message import ID_SLICE, Message
from . import wire
from .backup_server import PULL_BATCH
from .shard import Live
from .wire import Entry

if TYPE_CHECKING:
    from ..topic import Topic
    from .replicator import Replicator

log = logging.getLogger("nsqd")

PULL_TIMEOUT = 5.0  # silence from a survivor sending the copies an adoption asked it for


async def adopt(r: "Replicator", owner: str, asked_generation: int = 0) -> None:
    """``asked_generation``: the generation of the copies a holder asked us to adopt (we
    may hold none of them)."""
    generation = max(r.store.generation(owner), asked_generation)
    r.backup_side.fence(owner, generation)
    # every peer that may hold copies: its ring's backups, and while its ring moved
    # with the peer list, those of the lists since (membership.py)
    others = [b for b in r.holders_of(owner) if b != r.node and r.alive(b) and b in r.pinger]
    await asyncio.gather(*(_pull(r, peer, owner, generation) for peer in others))
    count, sent = _deliver(r, owner)
    r.adoptions_sent[owner] = (generation, [(topic, seq) for topic, seq, _ in sent])
    copies = [future for _, _, future in sent]
    r.generations.announce(owner, generation)
    r.store.drop(owner)
    r.adopted[owner] = r.adopted.get(owner, 0) + count
    log.warning("REPLICATION: %s lost: adopted %d of its messages (generation %d)", owner, count, generation)
    if copies:
        try:
            await asyncio.gather(*copies)
        except Exception as e:
            log.error("REPLICATION: the adopted messages of %s have no quorum of copies here (%s): "
                      "its other backups keep theirs until they ask again once it has", owner, e)
            return
    for peer in others:
        r.pinger[peer].send_once(wire.drop(owner, generation))


async def _pull(r: "Replicator", peer: str, owner: str, generation: int) -> None:
    seq = r.next_seq()
    waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    r.pulls[seq] = waiter
    r.pinger[peer].send_once(wire.pull(seq, owner, generation))
    asked = time.monotonic()
    try:
        # a large answer takes as long as it takes: the wait ends after PULL_TIMEOUT
        # without a frame of it, not PULL_TIMEOUT after asking
        while not waiter.done():
            quiet_until = max(asked, r.pull_progress.get(peer, 0.0)) + PULL_TIMEOUT
            remaining = quiet_until - time.monotonic()
            if remaining <= 0:
                log.error("REPLICATION: %s did not send its copies of %s in time: adopting without them",
                          peer, owner)
                return
            await asyncio.wait([waiter], timeout=remaining)
    finally:
        r.pulls.pop(seq, None)


def _deliver(r: "Replicator", owner: str) -> tuple[int, list[tuple[str, int, "asyncio.Future[None]"]]]:
    """Every live message of ``owner`` on this node's topics, and replicated as ours; how
    many, and the frames that carried them to our backups: topic, seq, and what resolves
    once a quorum of our backups holds them."""
    count = 0
    sent: list[tuple[str, int, asyncio.Future[None]]] = []
    # due times in the copies are the owner's wall clock: read against the owner's time
    # now, taken from ours by the offset its last PING showed (0 if none was heard since
    # this node started), and written in ours for our own backups
    offset = r.backup_side.clock_offsets.get(owner, 0)
    now_ms = time.time() * 1000 - offset
    for topic_name, shard in r.store.shards.get(owner, {}).items():
        live = shard.live()
        _pause_as_owner(r, topic_name, shard.paused, bool(live))
        if not live:
            continue
        topic = r.nsqd.get_topic(topic_name)
        # the owner's paused topic kept in its own queue what no channel was given yet:
        # owed to every channel, it waits in ours as well (may have been in all of them)
        queue = topic.paused and shard.paused.get("", False)
        for item in live:
            if queue and item.channels == shard.channels and not item.due:
                item = Live(item.entry, None)
            _put(topic, item, now_ms)
        count += len(live)
        if not r.replicates(topic_name):  # one copy of this topic here: ours alone
            continue
        for start in range(0, len(live), PULL_BATCH):
            seq, copied = r.replicate_entries(topic_name, [_in_our_clock(item.entry, offset)
                                                           for item in live[start:start + PULL_BATCH]])
            sent.append((topic_name, seq, copied))
        for channel in topic.channels:
            if is_ephemeral(channel):
                continue
            not_owed = [item.entry.payload[ID_SLICE] for item in live
                        if item.channels is not None and channel not in item.channels]
            if not_owed:
                r.finished(topic_name, channel, not_owed)
        for item in live:  # a REQ's delay, for our backups too
            for channel, due_ms in item.due.items():
                r.requeued(topic_name, channel, item.entry.payload[ID_SLICE], (due_ms + offset) / 1000)
    return count, sent


def _in_our_clock(entry: Entry, offset: int) -> Entry:
    if not entry.defer_until_ms or not offset:
        return entry
    return Entry(entry.payload, max(1, entry.defer_until_ms + offset))


def _pause_as_owner(r: "Replicator", topic_name: str, paused: dict[str, bool], has_live: bool) -> None:
    """What the owner had paused is paused here (through nsqd: kept in its metadata and
    told to our backups); what it had not is left as it is here."""
    if not any(paused.values()) or not (has_live or topic_name in r.nsqd.topics):
        return
    topic = r.nsqd.get_topic(topic_name)
    if paused.get("") and not topic.paused:
        r.nsqd.set_topic_paused(topic_name, True)
    for channel, is_paused in paused.items():
        if channel and is_paused and not topic.get_channel(channel).paused:
            r.nsqd.set_channel_paused(topic_name, channel, True)


def _put(topic: "Topic", item: Live, now_ms: float) -> None:
    payload = item.entry.payload
    defer = max(0.0, (item.entry.defer_until_ms - now_ms) / 1000)
    if item.channels is None:
        msg = Message.from_payload(payload)
        msg.defer = defer
        topic.put(msg if defer else payload)
        return
    for name in item.channels:
        channel = topic.get_channel(name)
        wait = defer
        if name in item.due:  # requeued with a delay: due then, not at the DPUB's time
            wait = max(0.0, (item.due[name] - now_ms) / 1000)
        if wait:
            channel.put_deferred(Message.from_payload(payload), wait)
        else:
            channel.put(payload)
