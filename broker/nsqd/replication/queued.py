"""What a topic of one copy holds, read back from its queues: the messages its own queue
holds for every channel, and for each channel those it still owes (queued in memory or
on disk, in flight, deferred). Its number of copies raised, these become the owner's
shard of it, which its new backups are sent as a snapshot.

Read synchronously, in one loop turn: nothing moves between the queues while it runs, so
each live message is read once, from wherever it is. A channel that holds none of a
message the others owe has finished it; one that holds it deferred owes it from its due
time. Ephemeral channels are not replicated: a message only they hold is not read."""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterator

from nsq_protocol.names import is_ephemeral

from ..message import ID_SLICE, Message, item_payload
from .wire import Entry

if TYPE_CHECKING:
    from ..backend import Backend
    from ..channel import Channel
    from ..deferrals import DeferralStore
    from ..topic import Topic


@dataclass
class Held:
    channels: list[str]
    messages: dict[bytes, Entry] = field(default_factory=dict)  # by ID, oldest first
    for_every_channel: set[bytes] = field(default_factory=set)  # IDs in the topic's own queue
    owed: dict[str, set[bytes]] = field(default_factory=dict)  # channel -> IDs it still holds
    due: dict[str, dict[bytes, int]] = field(default_factory=dict)  # channel -> ID -> due (ms)

    def finished(self, channel: str) -> list[bytes]:
        """The IDs ``channel`` is done with: held by others only."""
        owed, everyone = self.owed.get(channel, set()), self.for_every_channel
        return [msg_id for msg_id in self.messages if msg_id not in owed and msg_id not in everyone]


def read_held(topic: "Topic") -> Held:
    wall, mono = time.time(), time.monotonic()
    names = [name for name in topic.channels if not is_ephemeral(name)]
    held = Held(names)
    for name in names:
        channel = topic.channels[name]
        owed = held.owed[name] = set()
        due = held.due[name] = {}
        for msg_id, payload, due_ms in _channel_messages(channel, wall, mono):
            held.messages.setdefault(msg_id, Entry(payload, 0))
            owed.add(msg_id)
            if due_ms:
                due[msg_id] = due_ms
    for msg_id, payload, due_ms in _topic_messages(topic, wall):
        held.messages.setdefault(msg_id, Entry(payload, due_ms))
        held.for_every_channel.add(msg_id)
    return held


def _channel_messages(channel: "Channel", wall: float, mono: float) -> Iterator[tuple[bytes, bytes, int]]:
    """(ID, payload, due ms or 0) of every message ``channel`` holds, oldest first."""
    for msg in sorted(channel.in_flight.messages(), key=lambda m: m.delivered_at):
        yield msg.id, msg.encode(), 0  # with its attempts so far
    for item in channel.memory:
        payload = item_payload(item)
        yield payload[ID_SLICE], payload, 0
    yield from _on_disk(channel.backend, channel.deferrals, wall)
    for msg in sorted(channel.deferred.messages(), key=lambda m: m.deadline):
        yield msg.id, msg.encode(), _ms(wall + max(0.0, msg.deadline - mono))


def _topic_messages(topic: "Topic", wall: float) -> Iterator[tuple[bytes, bytes, int]]:
    """(ID, payload, due ms or 0) of every message in the topic's own queue: disk first,
    as the topic reads them."""
    yield from _on_disk(topic.backend, topic.deferrals, wall)
    for item in topic.memory:
        if item.__class__ is Message:
            msg: Message = item  # type: ignore[assignment]
            yield msg.id, msg.encode(), _ms(wall + msg.defer) if msg.defer > 0 else 0
        else:
            yield item[ID_SLICE], item, 0  # type: ignore[index,misc]


def _on_disk(backend: "Backend", deferrals: "DeferralStore | None", wall: float) -> Iterator[tuple[bytes, bytes, int]]:
    for payload in backend.unread():
        msg_id = payload[ID_SLICE]
        left = deferrals.remaining(msg_id) if deferrals is not None else 0.0
        yield msg_id, payload, _ms(wall + left) if left > 0 else 0


def _ms(seconds: float) -> int:
    return int(seconds * 1000)
