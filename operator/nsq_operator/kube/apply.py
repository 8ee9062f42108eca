"""Create what is missing, patch what differs, leave alone what already matches."""
from __future__ import annotations

from typing import Any, Protocol

# A StatefulSet's spec fields Kubernetes refuses to change after creation.
STATEFULSET_MUTABLE = ("replicas", "template", "updateStrategy", "persistentVolumeClaimRetentionPolicy",
                       "minReadySeconds", "ordinals")


class ObjectApi(Protocol):
    async def get(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None: ...
    async def create(self, manifest: dict[str, Any]) -> dict[str, Any]: ...
    async def patch(self, kind: str, namespace: str, name: str, patch: dict[str, Any],
                    subresource: str | None = None) -> dict[str, Any] | None: ...


def contains(actual: Any, wanted: Any) -> bool:
    """True when every field of ``wanted`` has the same value in ``actual``."""
    if isinstance(wanted, dict):
        return isinstance(actual, dict) and all(contains(actual.get(k), v) for k, v in wanted.items())
    if isinstance(wanted, list):
        return (isinstance(actual, list) and len(actual) == len(wanted)
                and all(contains(a, w) for a, w in zip(actual, wanted)))
    return bool(actual == wanted)


def updatable(manifest: dict[str, Any]) -> dict[str, Any]:
    """The part of a manifest a merge-patch may carry to an existing object."""
    patch = {k: v for k, v in manifest.items() if k not in ("apiVersion", "kind")}
    # a resourceVersion the manifest carries makes the write conditional (409 once the object moved on)
    patch["metadata"] = {k: v for k, v in manifest["metadata"].items()
                         if k in ("labels", "annotations", "ownerReferences", "resourceVersion")}
    if manifest["kind"] == "StatefulSet":
        patch["spec"] = {k: v for k, v in manifest["spec"].items() if k in STATEFULSET_MUTABLE}
    if manifest["kind"] == "Service":
        patch["spec"] = {k: v for k, v in manifest["spec"].items() if k != "clusterIP"}
    return patch


async def apply(api: ObjectApi, manifest: dict[str, Any]) -> str:
    """Make the object match the manifest; returns ``created``, ``patched`` or ``unchanged``."""
    meta = manifest["metadata"]
    existing = await api.get(manifest["kind"], meta["namespace"], meta["name"])
    if existing is None:
        await api.create(manifest)
        return "created"
    patch = updatable(manifest)
    if contains(existing, patch):
        return "unchanged"
    await api.patch(manifest["kind"], meta["namespace"], meta["name"], patch)
    return "patched"
