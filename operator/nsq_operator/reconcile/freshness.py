"""A periodic pass may start from a body read before the latest spec change; acting on
it would undo that change (scale a StatefulSet back, unpause a topic) until the next pass.
Such a pass steps aside: the change handler of the newer generation does the work."""
from __future__ import annotations

from typing import Any

from ..kube.client import KubeApi


class Superseded(Exception):
    """The object changed since this pass read it."""


async def ensure_current(api: KubeApi, body: Any) -> None:
    meta = body["metadata"]
    fresh = await api.get(body["kind"], meta["namespace"], meta["name"])
    if fresh is None or fresh["metadata"].get("generation") != meta.get("generation"):
        raise Superseded(f"{body['kind']} {meta['name']} changed since this pass began")
