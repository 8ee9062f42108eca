"""A periodic pass may start from a body read before the latest spec change; acting on
it would undo that change (scale a StatefulSet back, unpause a topic) until the next pass.
Such a pass steps aside: the change handler of the newer generation does the work.

Whether the object moved on is read from the body kopf hands the handler, which kopf
keeps up to date from its watch while the handler runs (a timer's body is live, and so
is a change handler's once the object has timers): no request to the API server. The
pass works on a snapshot of it and compares the two before every write."""
from __future__ import annotations

from typing import Any, Mapping


class Superseded(Exception):
    """The object changed since this pass read it."""


def ensure_current(live: Mapping[str, Any] | None, seen: Mapping[str, Any]) -> None:
    """``live``: kopf's body as it is now (None: nothing newer can be known); ``seen``: the
    snapshot the pass began with."""
    if live is None:
        return
    now, then = live["metadata"], seen["metadata"]
    if now.get("generation") != then.get("generation") or now.get("deletionTimestamp"):
        raise Superseded(f"{seen['kind']} {then['name']} changed since this pass began")
