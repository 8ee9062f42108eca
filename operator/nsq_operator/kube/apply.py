"""Applying the builders' manifests the way Kubernetes controllers do: server-side apply
under the operator's field manager, forced. The operator's fields become exactly what it
sends, so a field it stops setting (a node selector the user took out) disappears, while
fields another manager set (an annotation added with kubectl) stay.

A ``metadata.resourceVersion`` in the manifest makes the apply conditional: it fails
(409) once the object has moved on from the version it was read at.

What is read back is compared with what was sent by value where the apiserver rewrites
it: a quantity comes back canonical (``1024Mi`` as ``1Gi``, ``1.5Gi`` as ``1536Mi``).

A StatefulSet's spec beyond a few fields cannot change after creation; the apiserver
refuses the whole apply when one of them differs. Those are sent as they are, and what
could not be applied is returned for the caller to report."""
from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, Protocol

from .. import quantity

# A StatefulSet's spec fields Kubernetes refuses to change after creation, that we set.
STATEFULSET_IMMUTABLE = ("selector", "serviceName", "volumeClaimTemplates", "podManagementPolicy")


class ObjectApi(Protocol):
    async def apply(self, manifest: dict[str, Any]) -> dict[str, Any]: ...


# maps whose values are quantities (a ResourceRequirements' and a claim's), stored canonical
QUANTITY_MAPS = frozenset({"requests", "limits", "capacity"})


def contains(actual: Any, wanted: Any) -> bool:
    """True when every field of ``wanted`` has the same value in ``actual`` (which may
    hold more: what the apiserver defaulted). The values of ``requests``, ``limits`` and
    ``capacity`` are compared as quantities."""
    if isinstance(wanted, dict):
        return isinstance(actual, dict) and all(
            _same_quantities(actual.get(k), v) if k in QUANTITY_MAPS else contains(actual.get(k), v)
            for k, v in wanted.items())
    if isinstance(wanted, list):
        return (isinstance(actual, list) and len(actual) == len(wanted)
                and all(contains(a, w) for a, w in zip(actual, wanted)))
    return bool(actual == wanted)


def _same_quantities(actual: Any, wanted: Any) -> bool:
    if not (isinstance(actual, dict) and isinstance(wanted, dict)):
        return contains(actual, wanted)
    return all(actual.get(k) == v or quantity.same(actual.get(k), v) for k, v in wanted.items())


def immutable_changes(existing: dict[str, Any] | None, manifest: dict[str, Any]) -> list[str]:
    """The StatefulSet spec fields the manifest would change although they cannot change."""
    if existing is None or manifest["kind"] != "StatefulSet":
        return []
    have = existing.get("spec") or {}
    return [name for name in STATEFULSET_IMMUTABLE
            if name in manifest["spec"] and name in have and not contains(have[name], manifest["spec"][name])]


def as_it_is(existing: dict[str, Any], manifest: dict[str, Any], fields: list[str]) -> dict[str, Any]:
    """The manifest with these spec fields as the existing object has them."""
    kept = copy.deepcopy(manifest)
    for name in fields:
        kept["spec"][name] = copy.deepcopy(existing["spec"][name])
    return kept


@dataclass(frozen=True)
class Applied:
    obj: dict[str, Any]
    not_applied: list[str] = field(default_factory=list)  # immutable fields left as they were


async def apply(api: ObjectApi, manifest: dict[str, Any], existing: dict[str, Any] | None = None) -> Applied:
    """Apply the manifest; ``existing`` (a StatefulSet as read) lets a change of its
    immutable fields be held back and reported instead of failing the whole apply."""
    frozen = immutable_changes(existing, manifest)
    if frozen:
        assert existing is not None
        manifest = as_it_is(existing, manifest, frozen)
    return Applied(await api.apply(manifest), frozen)
