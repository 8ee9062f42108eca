"""Kubernetes Events about an object, posted by the operator itself (typed reasons such
as NewRevision or ScaleDown, which kopf's log-based events cannot carry)."""
from __future__ import annotations

from typing import Any, Literal, Mapping

from ..constants import MANAGED_BY
from ..status.conditions import now
from .client import KubeApi

EventType = Literal["Normal", "Warning"]


def event_manifest(involved: Mapping[str, Any], type_: EventType, reason: str, message: str) -> dict[str, Any]:
    meta = involved["metadata"]
    stamp = now()
    return {
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"generateName": f"{meta['name']}-", "namespace": meta["namespace"]},
        "involvedObject": {"apiVersion": involved.get("apiVersion"), "kind": involved.get("kind"),
                           "name": meta["name"], "namespace": meta["namespace"], "uid": meta.get("uid")},
        "type": type_, "reason": reason, "message": message[:1024],
        "source": {"component": MANAGED_BY}, "reportingComponent": MANAGED_BY,
        "firstTimestamp": stamp, "lastTimestamp": stamp, "count": 1,
    }


async def post_event(api: KubeApi, involved: Mapping[str, Any], type_: EventType, reason: str, message: str) -> None:
    await api.create(event_manifest(involved, type_, reason, message))
