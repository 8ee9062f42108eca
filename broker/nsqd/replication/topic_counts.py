"""How many copies each topic's messages get: the default (``--topic-replicas``), a
topic's own count from ``--topic-replicas-for`` (fixed for this run), or one set through
``POST /topic/create?replicas=N``, kept in ``<data-path>/replication/topics.json`` so
it survives a restart. NSQ's ``nsqd.dat`` is left as Go nsqd writes it.

Counts are capped at the number of peers; an ephemeral topic is never replicated."""
from __future__ import annotations

import json
import logging
import os

from nsq_protocol.names import is_ephemeral

log = logging.getLogger("nsqd")

FILE_NAME = "topics.json"


class TopicCountError(ValueError):
    """A count that cannot be set: out of range, fixed by a flag, or refused while the
    topic holds messages."""


class TopicCounts:
    def __init__(self, path: str, default: int, fixed: dict[str, int], peers: int) -> None:
        self.file = os.path.join(path, FILE_NAME)
        self.peers = peers
        self.default = min(default, peers)
        self.fixed = {topic: min(n, peers) for topic, n in fixed.items()}  # --topic-replicas-for
        self.chosen: dict[str, int] = self._read()  # through the HTTP API

    def _read(self) -> dict[str, int]:
        try:
            with open(self.file, "rb") as f:
                doc = json.loads(f.read())
        except FileNotFoundError:
            return {}
        except ValueError as e:
            raise ValueError(f"failed to parse {self.file}: {e}") from None
        return {str(topic): min(int(n), self.peers) for topic, n in (doc.get("topics") or {}).items()}

    def count(self, topic: str) -> int:
        if is_ephemeral(topic):
            return 1
        n = self.fixed.get(topic)
        if n is None:
            n = self.chosen.get(topic, self.default)
        return n

    def widest(self) -> int:
        return max([self.default, *self.fixed.values(), *self.chosen.values()])

    def check(self, topic: str, n: int) -> None:
        """Whether ``topic`` may be given ``n`` copies (before looking at its messages)."""
        if is_ephemeral(topic):
            if n != 1:
                raise TopicCountError("an ephemeral topic is never replicated: replicas must be 1")
            return
        if n > self.peers:
            raise TopicCountError(f"replicas {n} is above the {self.peers} nsqds of --replication-peer")
        fixed = self.fixed.get(topic)
        if fixed is not None and fixed != n:
            raise TopicCountError(f"topic {topic} has {fixed} replicas by --topic-replicas-for")

    def set(self, topic: str, n: int) -> None:
        if is_ephemeral(topic) or topic in self.fixed or self.chosen.get(topic) == n:
            return
        self.chosen[topic] = n
        self._write()

    def forget(self, topic: str) -> None:
        """The topic was deleted: made again later, it gets the default unless told."""
        if self.chosen.pop(topic, None) is not None:
            self._write()

    def _write(self) -> None:
        os.makedirs(os.path.dirname(self.file), exist_ok=True)
        temp = self.file + ".tmp"
        with open(temp, "w") as f:
            json.dump({"topics": dict(sorted(self.chosen.items()))}, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(temp, self.file)
