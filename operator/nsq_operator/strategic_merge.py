"""A user's pod template override merged into a generated template the way Kubernetes
merges a strategic merge patch into a pod template: maps merge key by key and a null
removes a key; the lists Kubernetes declares with a patch merge key (containers, volumes,
env ...) merge item by item on that key, an item with ``$patch: delete`` removing its
match; every other list (args, tolerations ...) is replaced whole."""
from __future__ import annotations

import copy
from typing import Any, Mapping

# Kubernetes' patch merge keys (x-kubernetes-patch-merge-key in its OpenAPI schema) of
# the pod spec and of a container; tests check this table against the schema.
POD_SPEC_MERGE_KEYS: dict[str, str] = {
    "containers": "name", "initContainers": "name", "ephemeralContainers": "name", "volumes": "name",
    "imagePullSecrets": "name", "hostAliases": "ip", "resourceClaims": "name", "schedulingGates": "name",
    "topologySpreadConstraints": "topologyKey",
}
CONTAINER_MERGE_KEYS: dict[str, str] = {
    "env": "name", "ports": "containerPort", "volumeMounts": "mountPath", "volumeDevices": "devicePath",
}
CONTAINER_LISTS = ("containers", "initContainers", "ephemeralContainers")
DELETE_DIRECTIVE = ("$patch", "delete")


class OverrideError(ValueError):
    """An override that cannot be merged (a list item without its merge key ...)."""


def _merge_map(base: Mapping[str, Any], patch: Mapping[str, Any], list_keys: Mapping[str, str],
               path: str) -> dict[str, Any]:
    result = copy.deepcopy(dict(base))
    for key, value in patch.items():
        where = f"{path}.{key}"
        if value is None:
            result.pop(key, None)
        elif key in list_keys and isinstance(value, list):
            item_keys = CONTAINER_MERGE_KEYS if key in CONTAINER_LISTS else {}
            result[key] = _merge_list(result.get(key) or [], value, list_keys[key], item_keys, where)
        elif isinstance(value, dict) and isinstance(result.get(key), dict):
            result[key] = _merge_map(result[key], value, {}, where)
        else:
            result[key] = copy.deepcopy(value)
    return result


def _merge_list(base: list[Any], patch: list[Any], merge_key: str, item_keys: Mapping[str, str],
                path: str) -> list[Any]:
    merged = copy.deepcopy(base)
    for item in patch:
        if not isinstance(item, dict) or merge_key not in item:
            raise OverrideError(f"{path}: every item needs its {merge_key!r}")
        at = next((i for i, have in enumerate(merged) if isinstance(have, dict) and have.get(merge_key) == item[merge_key]),
                  None)
        where = f"{path}[{merge_key}={item[merge_key]}]"
        if item.get(DELETE_DIRECTIVE[0]) == DELETE_DIRECTIVE[1]:
            if at is not None:
                del merged[at]
            continue
        if any(key.startswith("$") for key in item):
            raise OverrideError(f"{where}: only '$patch: delete' is understood")
        if at is None:
            merged.append(_merge_map({}, item, item_keys, where))
        else:
            merged[at] = _merge_map(merged[at], item, item_keys, where)
    return merged


def merge_pod_template(template: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """``template`` with ``override`` (a partial core/v1 PodTemplateSpec) merged in."""
    merged = copy.deepcopy(dict(template))
    meta = override.get("metadata") or {}
    for field in ("labels", "annotations"):
        if meta.get(field):
            merged.setdefault("metadata", {})[field] = _merge_map(merged["metadata"].get(field) or {}, meta[field], {},
                                                                  f"metadata.{field}")
    if override.get("spec"):
        merged["spec"] = _merge_map(merged.get("spec") or {}, override["spec"], POD_SPEC_MERGE_KEYS, "spec")
    return merged
