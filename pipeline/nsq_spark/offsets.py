"""Offsets of the NSQ source, as Spark stores them in its checkpoint.

NSQ has no replayable log, so an offset cannot name a place in the topic. It names a
place in what one reader received: ``seq`` counts the messages delivered to the reader
process (``session``) since it started. A batch ``(start, end]`` holds the messages
numbered ``start.seq + 1 .. end.seq`` of the session.

``flush`` exists because Spark only commits batch N (and the reader only FINs its
messages) when it plans batch N+1: when no message arrived after batch N, the reader
raises ``flush`` to make Spark plan an empty batch, which commits the last one.

An offset of another session comes from a checkpoint written by an earlier run. Its
messages were never FINed by this process and nsqd delivers them again, so they are not
re-created: the range ``(start, end]`` of an earlier session holds nothing, and a range
from an earlier session's offset to one of this session holds this session's messages
from the first.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Position:
    session: str
    seq: int = 0
    flush: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"session": self.session, "seq": self.seq, "flush": self.flush}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Position":
        try:
            return cls(str(data["session"]), int(data["seq"]), int(data.get("flush", 0)))
        except (KeyError, TypeError, ValueError) as err:
            raise ValueError(f"not an offset of the nsq source: {data!r}") from err

    def advanced_to(self, seq: int) -> "Position":
        return Position(self.session, seq, self.flush)

    def flushed(self) -> "Position":
        return Position(self.session, self.seq, self.flush + 1)


def seq_in_session(position: Position, session: str) -> int:
    """Where ``position`` leaves this session's messages: before the first one when it
    belongs to an earlier session."""
    return position.seq if position.session == session else 0


def messages_between(start: Position, end: Position, session: str) -> tuple[int, int]:
    """The sequence numbers ``(after, through]`` a batch from ``start`` to ``end`` holds in
    ``session``; an empty range when ``end`` belongs to an earlier session."""
    if end.session != session:
        return 0, 0
    after = seq_in_session(start, session)
    return after, max(after, end.seq)


def even_ranges(after: int, through: int, parts: int) -> list[tuple[int, int]]:
    """``(after, through]`` cut into at most ``parts`` consecutive ranges of near-equal
    size, none empty."""
    count = through - after
    parts = max(1, min(parts, count))
    size, extra = divmod(count, parts)
    ranges, begin = [], after
    for i in range(parts):
        end = begin + size + (1 if i < extra else 0)
        if end > begin:
            ranges.append((begin, end))
        begin = end
    return ranges
