"""The backup's side: connections from owners. Their APPEND, FIN and CHANNELS frames go
to the store; an APPEND is acknowledged once the store committed it; a PULL is answered
with every copy held of the owner asked for."""
from __future__ import annotations

import asyncio
import logging
from typing import Callable

from . import wire
from .store import ReplicaStore
from .wire import Entry, Frame, Kind

log = logging.getLogger("nsqd")

PULL_BATCH = 500  # messages in one APPEND of a PULL's answer


class BackupConnection(asyncio.Protocol):
    def __init__(self, store: ReplicaStore, heard: Callable[[str], None], known: Callable[[str], bool]) -> None:
        self.store = store
        self._heard = heard
        self._known = known
        self.owner: str | None = None
        self._ack_due = 0  # the highest APPEND committed and not yet acknowledged
        self._decoder = wire.Decoder()
        self._transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]

    def connection_lost(self, exc: Exception | None) -> None:
        self._transport = None

    def data_received(self, data: bytes) -> None:
        self._decoder.feed(data)
        try:
            frames = self._decoder.frames_with_bytes()
            for frame, raw in frames:
                self._handle(frame, raw)
        except wire.WireError as e:
            log.error("REPLICATION: bad frame from %s: %s", self.owner or "a new connection", e)
            if self._transport is not None:
                self._transport.close()

    def _handle(self, frame: Frame, raw: bytes) -> None:
        if self.owner is None:
            if frame.kind is not Kind.HELLO or not self._known(frame.name):
                raise wire.WireError(f"expected HELLO from a peer, got {frame.kind.name} {frame.name!r}")
            self.owner = frame.name
            self._heard(frame.name)
            return
        self._heard(self.owner)
        kind = frame.kind
        if kind is Kind.APPEND:
            self.store.apply(self.owner, frame, raw)
            seq = frame.seq
            self.store.after_commit(lambda: self._committed(seq))
        elif kind in (Kind.FIN, Kind.CHANNELS):
            self.store.apply(self.owner, frame, raw)
        elif kind is Kind.PULL:
            self._answer_pull(frame.seq, frame.name)
        elif kind is not Kind.PING:
            raise wire.WireError(f"unexpected {kind.name} from an owner")

    def _committed(self, seq: int) -> None:
        """One ACK for all the APPENDs a commit made durable (ACKs are cumulative)."""
        if not self._ack_due:
            asyncio.get_running_loop().call_soon(self._send_ack)
        self._ack_due = max(self._ack_due, seq)

    def _send_ack(self) -> None:
        seq, self._ack_due = self._ack_due, 0
        self._write(wire.ack(seq))

    def _answer_pull(self, seq: int, owner: str) -> None:
        self._write(b"".join(pull_answer(self.store, owner)) + wire.done(seq))

    def _write(self, data: bytes) -> None:
        if self._transport is not None:
            self._transport.write(data)


def pull_answer(store: ReplicaStore, owner: str) -> list[bytes]:
    """Every copy ``store`` holds of ``owner``'s messages, as PULLED frames: per topic its
    channels, its messages, then what each channel finished (applied in that order, they
    rebuild the same shard)."""
    out = []
    for topic, shard in store.shards.get(owner, {}).items():
        out.append(wire.pulled(owner, wire.channels(topic, shard.channels)))
        entries: list[Entry] = list(shard.messages.values())
        for start in range(0, len(entries), PULL_BATCH):
            out.append(wire.pulled(owner, wire.append(0, topic, entries[start:start + PULL_BATCH])))
        for channel, ids in shard.finished.items():
            if ids:
                out.append(wire.pulled(owner, wire.fin(topic, channel, sorted(ids))))
    return out
