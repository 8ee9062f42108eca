"""nsqd's disks after creation. A StatefulSet's claim template cannot change, so a bigger
``storage.size`` is carried out by hand, as Kubernetes suggests: every existing claim is
expanded in place (the StorageClass must allow it, or the cluster says
StorageResizeFailed with the apiserver's words), then the StatefulSet is deleted leaving
its pods running (orphaned) and, once the garbage collector has let it go (an orphan
finalizer holds it until the pods are released), created again from the new template
with as many replicas as pods run, so nsqds added later get the new size too; the new
StatefulSet adopts the running pods. A smaller
size or another storage class cannot be carried out at all: it is refused, naming the
field."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..builders import labels
from ..kube.apply import contains
from ..kube.client import KubeApi, KubeApiError
from ..models import NsqCluster
from ..models.common import quantity_value

SIZE_FIELD = "spec.nsqd.storage.size"
CLASS_FIELD = "spec.nsqd.storage.storageClassName"
STORAGE_EXPANDED = "StorageExpanded"
STORAGE_RESIZE_FAILED = "StorageResizeFailed"


@dataclass(frozen=True)
class StorageChange:
    grow_to: str | None  # the new size, when growing is all that changed
    refused: str | None  # why the change cannot be carried out, naming the field


def _claim(statefulset: dict[str, Any]) -> dict[str, Any]:
    templates = statefulset["spec"].get("volumeClaimTemplates") or [{}]
    return dict(templates[0])


def _size(claim: dict[str, Any]) -> str:
    return str(((claim.get("spec") or {}).get("resources") or {}).get("requests", {}).get("storage", "0"))


def storage_change(existing: dict[str, Any], manifest: dict[str, Any]) -> StorageChange:
    """What the manifest's claim template asks of the existing StatefulSet's."""
    have, want = _claim(existing), _claim(manifest)
    have_class = (have.get("spec") or {}).get("storageClassName")
    want_class = (want.get("spec") or {}).get("storageClassName")
    if want_class != have_class and want_class is not None:
        return StorageChange(None, f"{CLASS_FIELD} cannot change from {have_class or 'the default'} to {want_class}: "
                                   f"the claims of the existing nsqds keep their class")
    have_size, want_size = _size(have), _size(want)
    if quantity_value(want_size) < quantity_value(have_size):
        return StorageChange(None, f"{SIZE_FIELD} cannot shrink from {have_size} to {want_size}: "
                                   f"Kubernetes expands claims, it never shrinks them")
    same_otherwise = dict(want, spec={**want.get("spec", {}), "resources": have.get("spec", {}).get("resources")})
    if quantity_value(want_size) > quantity_value(have_size) and contains(have, same_otherwise):
        return StorageChange(want_size, None)
    return StorageChange(None, None)


@dataclass(frozen=True)
class Grown:
    expanded: list[str]  # the claims expanded
    refused: list[tuple[str, str]]  # the claims the apiserver would not expand, with its words


async def grow(api: KubeApi, cluster: NsqCluster, statefulset: str, size: str) -> Grown:
    """Expand every claim of the cluster's nsqds to ``size``, then delete the StatefulSet,
    orphaning its pods, for the caller to make it anew once it is gone. A claim the
    apiserver refuses to expand (its StorageClass does not allow it: 403; not bound yet:
    422) leaves the StatefulSet as it is: a later pass tries again."""
    expanded, refused = [], []
    for claim in await api.list("PersistentVolumeClaim", cluster.namespace, labels.selector(cluster, labels.NSQD)):
        if quantity_value(_size(claim)) < quantity_value(size):
            name = claim["metadata"]["name"]
            try:
                await api.patch("PersistentVolumeClaim", cluster.namespace, name,
                                {"spec": {"resources": {"requests": {"storage": size}}}})
            except KubeApiError as e:
                if not e.refused:
                    raise
                refused.append((name, e.said))
                continue
            expanded.append(name)
    if not refused:
        await api.delete("StatefulSet", cluster.namespace, statefulset, propagation="Orphan")
    return Grown(expanded, refused)
