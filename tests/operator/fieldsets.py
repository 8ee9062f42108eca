"""Field ownership and server-side apply as the kube-apiserver does them (its
structured-merge-diff library), for the shapes of the objects this project writes.

- An object's fields are paths to its leaves. A list whose items the Kubernetes schema
  keys (containers by name, ports by port and protocol ...) is a map of items: each item
  is a path of its own, found by its key. Every other list is atomic: one leaf.
- Each manager (a fieldManager and its operation, Apply or Update) owns a set of paths.
- Apply: the manager's new set is exactly the fields of what it sent; fields it owned
  before and no longer sends are removed from the object unless another manager owns them
  too; a field another manager owns with a different value is a conflict, refused unless
  the request forces it (then the field changes hands).
- Update (create, merge, strategic or JSON patch): the manager takes the fields whose value
  it changed; fields that disappear leave every set.

What is simplified: the list keys are a table of the paths this project's objects use
(any other list is atomic, as an unlisted list is in a CRD); list items of no key are
compared whole."""
from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from typing import Any, Iterator

# Lists the Kubernetes schema merges by key (x-kubernetes-list-type: map / patchMergeKey),
# by the field names leading to them.
_POD = ("spec",)
_TEMPLATE = ("spec", "template", "spec")
LIST_KEYS: dict[tuple[str, ...], tuple[str, ...]] = {
    ("metadata", "ownerReferences"): ("uid",),
    ("spec", "ports"): ("port", "protocol"),  # Service
    **{pod + suffix: keys for pod in (_POD, _TEMPLATE) for suffix, keys in {
        ("containers",): ("name",),
        ("initContainers",): ("name",),
        ("containers", "ports"): ("containerPort", "protocol"),
        ("containers", "env"): ("name",),
        ("containers", "volumeMounts"): ("mountPath",),
        ("volumes",): ("name",),
        ("imagePullSecrets",): ("name",),
        ("topologySpreadConstraints",): ("topologyKey", "whenUnsatisfiable"),
        ("readinessGates",): ("conditionType",),
    }.items()},
    ("status", "conditions"): ("type",),  # Pod status
}
# Fields the apiserver keeps for itself: nobody owns them.
SERVER_OWNED = {("apiVersion",), ("kind",), ("metadata", "name"), ("metadata", "namespace"), ("metadata", "uid"),
                ("metadata", "resourceVersion"), ("metadata", "generation"), ("metadata", "creationTimestamp"),
                ("metadata", "managedFields"), ("metadata", "deletionTimestamp"), ("metadata", "generateName")}
MISSING = object()


@dataclass(frozen=True)
class Item:
    """A list item by its key, as ``k:{"name":"nsqd"}`` in managedFields."""
    key: tuple[tuple[str, Any], ...]

    @classmethod
    def of(cls, item: dict[str, Any], keys: tuple[str, ...]) -> "Item":
        return cls(tuple((k, item.get(k)) for k in keys))

    def matches(self, item: Any) -> bool:
        return isinstance(item, dict) and all(item.get(k) == v for k, v in self.key)

    def __str__(self) -> str:
        return "k:" + json.dumps(dict(self.key), separators=(",", ":"), sort_keys=True)


Element = str | Item
Path = tuple[Element, ...]
FieldSet = frozenset[Path]
Manager = tuple[str, str]  # (fieldManager, "Apply" or "Update")


class Conflicts(Exception):
    def __init__(self, conflicts: list[tuple[Manager, Path]]) -> None:
        self.conflicts = conflicts
        described = "; ".join(f'conflict with "{m[0]}" using {m[1]}: {render(p)}' for m, p in conflicts)
        super().__init__(f"Apply failed with {len(conflicts)} conflict(s): {described}")


def render(path: Path) -> str:
    return ".".join(str(e) for e in path)


def _names(path: Path) -> tuple[str, ...]:
    return tuple(e for e in path if isinstance(e, str))


def _keys(path: Path, value: Any) -> tuple[str, ...] | None:
    keys = LIST_KEYS.get(_names(path))
    if keys is None or not isinstance(value, list) or not all(isinstance(i, dict) for i in value):
        return None
    return keys


def _walk(value: Any, path: Path) -> Iterator[Path]:
    if isinstance(value, dict) and value:
        for key, sub in value.items():
            yield from _walk(sub, (*path, key))
        return
    keys = _keys(path, value)
    if keys is not None and value:
        for item in value:
            item_path = (*path, Item.of(item, keys))
            yield item_path
            yield from _walk(item, item_path)
        return
    yield path


def fields(obj: dict[str, Any], status: bool = False) -> FieldSet:
    """Every owned path of the object; ``status`` too only when written through /status."""
    return frozenset(p for p in _walk(obj, ()) if p and p[:2] not in SERVER_OWNED and p[:1] not in SERVER_OWNED
                     and (status or p[0] != "status"))


def get(obj: Any, path: Path) -> Any:
    for element in path:
        if isinstance(element, Item):
            obj = next((i for i in obj if element.matches(i)), MISSING) if isinstance(obj, list) else MISSING
        else:
            obj = obj.get(element, MISSING) if isinstance(obj, dict) else MISSING
        if obj is MISSING:
            return MISSING
    return obj


def remove(obj: dict[str, Any], path: Path) -> None:
    """Drop the field, and each parent map or keyed list the removal leaves empty."""
    parents: list[tuple[Any, Element]] = []
    node: Any = obj
    for element in path:
        parents.append((node, element))
        node = get(node, (element,))
        if node is MISSING:
            return
    while parents:
        parent, element = parents.pop()
        if isinstance(element, Item):
            parent[:] = [i for i in parent if not element.matches(i)]
        else:
            parent.pop(element, None)
        if parent or not parents:
            return


def merge(live: Any, config: Any, path: Path = ()) -> Any:
    """The config laid over the live object: maps merge, keyed lists merge item by item
    (the config's items in its order, then the live ones it does not name), anything else
    is replaced."""
    if isinstance(config, dict) and isinstance(live, dict):
        out = dict(live)
        for key, value in config.items():
            out[key] = merge(live.get(key), value, (*path, key))
        return out
    keys = _keys(path, config)
    if keys is not None and isinstance(live, list) and _keys(path, live) is not None:
        out_items = []
        for item in config:
            item_key = Item.of(item, keys)
            existing = next((i for i in live if item_key.matches(i)), None)
            out_items.append(merge(existing, item, (*path, item_key)) if existing is not None else copy.deepcopy(item))
        named = [Item.of(i, keys) for i in config]
        out_items += [copy.deepcopy(i) for i in live if not any(k.matches(i) for k in named)]
        return out_items
    return copy.deepcopy(config)


def apply(live: dict[str, Any], config: dict[str, Any], manager: str, force: bool,
          owners: dict[Manager, FieldSet]) -> tuple[dict[str, Any], dict[Manager, FieldSet]]:
    """Server-side apply of ``config`` by ``manager`` over ``live`` ({} when creating)."""
    me: Manager = (manager, "Apply")
    applied = fields(config)
    others = {m: s for m, s in owners.items() if m != me}
    conflicts = [(m, p) for m, owned in others.items() for p in sorted(applied & owned, key=render)
                 if not isinstance(p[-1], Item) and get(live, p) != get(config, p)]
    if conflicts and not force:
        raise Conflicts(conflicts)
    taken = {p for _, p in conflicts}
    others = {m: frozenset(s - taken) for m, s in others.items()}
    still_owned = frozenset().union(*others.values()) if others else frozenset()
    result = copy.deepcopy(live)
    for path in _removable(owners.get(me, frozenset()) - applied, still_owned):
        remove(result, path)
    result = merge(result, config)
    return result, _settled(result, {**others, me: applied})


def _removable(dropped: FieldSet, still_owned: FieldSet) -> list[Path]:
    """What goes of the fields a manager dropped: not a field another manager holds, nor
    an item under which another manager holds a field; an item goes with its fields."""
    held = {p[:n] for p in still_owned for n in range(1, len(p) + 1)}
    out: list[Path] = []
    for path in sorted(dropped - held, key=len):
        if not any(path[:len(done)] == done for done in out):
            out.append(path)
    return out


def update(live: dict[str, Any], new: dict[str, Any], manager: str, owners: dict[Manager, FieldSet],
           status: bool = False) -> dict[Manager, FieldSet]:
    """Ownership after a non-apply write by ``manager``: it takes what it changed."""
    me: Manager = (manager, "Update")
    changed = frozenset(p for p in fields(new, status) if get(live, p) != get(new, p))
    moved = {m: frozenset(s - changed) for m, s in owners.items()}
    moved[me] = moved.get(me, frozenset()) | changed
    return _settled(new, moved)


def _settled(obj: dict[str, Any], owners: dict[Manager, FieldSet]) -> dict[Manager, FieldSet]:
    """Paths that no longer exist leave every set; a manager with nothing left goes."""
    present = fields(obj, status=True)
    out = {m: frozenset(s & present) for m, s in owners.items()}
    return {m: s for m, s in out.items() if s}


def managed_fields(owners: dict[Manager, FieldSet], api_version: str, time: str) -> list[dict[str, Any]]:
    """metadata.managedFields in the apiserver's FieldsV1 form."""
    entries = []
    for (manager, operation), owned in sorted(owners.items()):
        tree: dict[str, Any] = {}
        for path in owned:
            node = tree
            for element in path:
                node = node.setdefault(str(element) if isinstance(element, Item) else f"f:{element}", {})
            if isinstance(path[-1], Item):
                node["."] = {}
        entries.append({"manager": manager, "operation": operation, "apiVersion": api_version, "time": time,
                        "fieldsType": "FieldsV1", "fieldsV1": tree})
    return entries
