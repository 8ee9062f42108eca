"""A topic's backlog as it lies on disk once a drain has persisted it: what a scale-down
drain hands to other nsqds.

The backlog is the union, by message ID, of the topic's own queue (messages no channel
has received yet) and every channel's queue (its share of what was fanned out and not
yet finished: queued, requeued, deferred). Channels are read first, the most lagging
one first, so the bulk comes in publishing order; the topic's queue, the newest part,
comes last. A message carries the delay it still had in the deferral sidecar of the
queue it was first found in.

Only files are read (nothing changes on disk), one queue after another, a message at a
time. Memory: the IDs already seen (about 100 bytes each) and one deferral sidecar's
records.
"""
from __future__ import annotations

import logging
import math
import os
from collections.abc import Generator, Sequence
from contextlib import closing
from dataclasses import dataclass

from nsq_protocol.errors import ProtocolError
from nsq_protocol.message import decode_message

from .deferrals import DeferralStore, deferrals_path
from .diskqueue import queue_depth, read_unread


@dataclass(frozen=True, slots=True)
class BacklogMessage:
    id: bytes
    body: bytes
    defer_ms: int  # how long it still waits before delivery; 0 when it is due


def channel_queue(topic: str, channel: str) -> str:
    return f"{topic}:{channel}"


def topic_queues(topic: str, channels: Sequence[str]) -> list[str]:
    """Every queue (disk queue and deferral sidecar share the name) holding the topic's messages."""
    return [topic, *(channel_queue(topic, c) for c in channels)]


def backlog_depth(data_path: str | os.PathLike[str], topic: str, channels: Sequence[str]) -> int:
    """Messages on disk for the topic, counted per queue (one waiting in two channels counts twice)."""
    return sum(queue_depth(data_path, queue) for queue in topic_queues(topic, channels))


def read_backlog(data_path: str | os.PathLike[str], topic: str, channels: Sequence[str], *,
                 min_msg_size: int, max_msg_size: int, logger: logging.Logger) -> Generator[BacklogMessage, None, None]:
    """The topic's backlog, each message ID once (see the module's docstring)."""
    by_lag = sorted(channels, key=lambda c: -queue_depth(data_path, channel_queue(topic, c)))
    queues = [channel_queue(topic, c) for c in by_lag] + [topic]
    seen: set[bytes] = set()
    for queue in queues:
        deferrals = DeferralStore(deferrals_path(data_path, queue), journaled=False, logger=logger)
        payloads = read_unread(data_path, queue, min_msg_size=min_msg_size, max_msg_size=max_msg_size,
                               logger=logger)
        with closing(payloads):
            for payload in payloads:
                try:
                    message = decode_message(payload)
                except ProtocolError as e:
                    logger.error("HANDOFF: skipping an undecodable message in queue %s: %s", queue, e)
                    continue
                if message.id in seen:
                    continue
                seen.add(message.id)
                defer_ms = math.ceil(deferrals.remaining(message.id) * 1000)
                yield BacklogMessage(message.id, message.body, defer_ms)
