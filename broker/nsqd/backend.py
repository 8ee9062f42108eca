"""Where a topic's or channel's messages go once its memory queue is full."""
from __future__ import annotations

from typing import Iterator, Protocol, Sequence


class Backend(Protocol):
    @property
    def depth(self) -> int: ...
    def put(self, data: bytes) -> None: ...
    def put_many(self, items: Sequence[bytes]) -> None: ...
    def get(self) -> bytes | None: ...
    def get_many(self, limit: int) -> list[bytes]: ...
    def unread(self) -> Iterator[bytes]: ...
    def empty(self) -> None: ...
    def sync(self) -> None: ...
    def sync_due(self, now: float) -> bool: ...
    def sync_if_due(self, now: float) -> None: ...
    def close(self) -> None: ...
    def delete(self) -> None: ...


class DiscardingBackend:
    """Ephemeral topics and channels keep nothing beyond memory: overflow is dropped,
    as in nsqd (that is what "ephemeral" promises)."""

    depth = 0

    def __init__(self) -> None:
        self.dropped = 0

    def put(self, data: bytes) -> None:
        self.dropped += 1

    def put_many(self, items: Sequence[bytes]) -> None:
        self.dropped += len(items)

    def get(self) -> bytes | None:
        return None

    def get_many(self, limit: int) -> list[bytes]:
        return []

    def unread(self) -> Iterator[bytes]:
        return iter(())

    def empty(self) -> None:
        return None

    def sync(self) -> None:
        return None

    def sync_due(self, now: float) -> bool:
        return False

    def sync_if_due(self, now: float) -> None:
        return None

    def close(self) -> None:
        return None

    def delete(self) -> None:
        return None
