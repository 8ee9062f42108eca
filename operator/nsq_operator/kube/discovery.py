"""Whether the API server serves a kind of an optional API (cert-manager's Certificate,
the Prometheus Operator's PodMonitor): asked through discovery at most once a minute per
group version, so a cluster without them costs one request a minute, not one a pass."""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Protocol

from .resources import KINDS

RECHECK_SECONDS = 60.0  # CRDs installed later are found within this long


class Discovers(Protocol):
    async def resources_of(self, api_version: str) -> list[str] | None: ...


@dataclass
class Discovery:
    recheck: float = RECHECK_SECONDS
    _seen: dict[str, tuple[float, frozenset[str]]] = field(default_factory=dict)

    async def serves(self, api: Discovers, kind: str) -> bool:
        known = KINDS[kind]
        seen = self._seen.get(known.api_version)
        if seen is None or time.monotonic() - seen[0] > self.recheck:
            plurals = await api.resources_of(known.api_version)
            seen = (time.monotonic(), frozenset(plurals or ()))
            self._seen[known.api_version] = seen
        return known.plural in seen[1]
