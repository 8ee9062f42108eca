"""One owner's copies of one topic, as a backup keeps them: the messages, the channels
the owner's topic has, and which of those channels finished which message. A message
leaves the shard once every channel finished it."""
from __future__ import annotations

from dataclasses import dataclass, field

from ..message import ID_SLICE
from .wire import Entry


@dataclass
class Live:
    """A message to deliver after adoption, and the channels still owed it (all of them
    when ``channels`` is None: the topic had no channel yet)."""
    entry: Entry
    channels: list[str] | None


@dataclass
class Shard:
    messages: dict[bytes, Entry] = field(default_factory=dict)  # by ID, in arrival order
    channels: list[str] = field(default_factory=list)
    finished: dict[str, set[bytes]] = field(default_factory=dict)  # channel -> IDs

    def append(self, entries: list[Entry]) -> int:
        """Copies received (a resend after a reconnect repeats some: kept once); how
        many were new."""
        new = 0
        for entry in entries:
            msg_id = entry.payload[ID_SLICE]
            if msg_id not in self.messages:
                self.messages[msg_id] = entry
                new += 1
        return new

    def finish(self, channel: str, ids: list[bytes]) -> None:
        done = self.finished.setdefault(channel, set())
        for msg_id in ids:
            if msg_id in self.messages:  # a copy this backup missed: nothing to forget
                done.add(msg_id)
                self._forget_if_done(msg_id)

    def set_channels(self, names: list[str]) -> None:
        self.channels = list(names)
        for gone in set(self.finished) - set(names):
            del self.finished[gone]
        if names:
            for msg_id in list(self.messages):
                self._forget_if_done(msg_id)

    def _forget_if_done(self, msg_id: bytes) -> None:
        if not self.channels:
            return
        finished = self.finished
        if all(msg_id in finished.get(c, ()) for c in self.channels):
            del self.messages[msg_id]
            for done in finished.values():
                done.discard(msg_id)

    def live(self) -> list[Live]:
        out = []
        for msg_id, entry in self.messages.items():
            if not self.channels:
                out.append(Live(entry, None))
                continue
            owed = [c for c in self.channels if msg_id not in self.finished.get(c, ())]
            out.append(Live(entry, owed))
        return out

    def __len__(self) -> int:
        return len(self.messages)
