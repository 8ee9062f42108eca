"""One listing of nsqd's data path at start: which queues have segment files, which have a
deferral sidecar.

nsqd opens a disk queue and a deferral store for every topic and channel at start; each
listing the directory (or probing for its files) made a start with thousands of topics
quadratic. Each queue takes its entry once, when it opens; a name not listed has no
files, which also holds for every queue created later, since only a queue writes its own.
"""
from __future__ import annotations

import os
import re

_SEGMENT = re.compile(r"(.+)\.diskqueue\.([0-9]{6,})\.dat")  # greedy: the name is all before the suffix
_DEFERRALS_SUFFIX = ".diskqueue.deferred.dat"


class DataListing:
    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self._segments: dict[str, list[int]] = {}
        self._deferrals: set[str] = set()
        for entry in os.scandir(directory):
            name = entry.name
            if name.endswith(_DEFERRALS_SUFFIX):
                self._deferrals.add(name[: -len(_DEFERRALS_SUFFIX)])
                continue
            match = _SEGMENT.fullmatch(name)
            if match is not None:
                self._segments.setdefault(match.group(1), []).append(int(match.group(2)))

    def take_segments(self, queue: str) -> list[int]:
        """The numbers of ``queue``'s segment files, sorted; forgotten here once taken."""
        return sorted(self._segments.pop(queue, ()))

    def take_deferrals(self, queue: str) -> bool:
        """Whether ``queue`` has a deferral sidecar; forgotten here once taken."""
        if queue in self._deferrals:
            self._deferrals.discard(queue)
            return True
        return False
