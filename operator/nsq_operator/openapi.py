"""Pydantic JSON Schema -> Kubernetes structural OpenAPI v3 schema.

Kubernetes wants every node typed, no ``$ref``, no ``additionalProperties`` beside
``properties``, boolean ``exclusiveMinimum``, and no ``null`` branches; pydantic emits
all of those. Nested objects default to ``{}`` so the API server fills their fields."""
from __future__ import annotations

from typing import Any

from pydantic import BaseModel

_DROPPED = {"title", "$defs"}


def structural_schema(model: type[BaseModel]) -> dict[str, Any]:
    raw = model.model_json_schema(by_alias=True, mode="validation")
    return _convert(raw, raw.get("$defs", {}))


def _convert(node: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    node = _resolve(node, defs)
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in _DROPPED:
            continue
        if key == "properties":
            out[key] = {name: _defaulted(_convert(sub, defs), name in node.get("required", ()) or _off_by_default(sub))
                        for name, sub in value.items()}
        elif key == "items":
            out[key] = _convert(value, defs)
        elif key == "additionalProperties":
            if isinstance(value, dict):
                out[key] = _convert(value, defs)
        elif key == "anyOf":
            out[key] = [_convert(branch, defs) for branch in value]
        elif key in ("exclusiveMinimum", "exclusiveMaximum") and not isinstance(value, bool):
            out["minimum" if key == "exclusiveMinimum" else "maximum"] = value
            out[key] = True
        elif key == "const":
            out["enum"] = [value]
        else:
            out[key] = value
    if out.get("x-kubernetes-preserve-unknown-fields"):
        out.pop("additionalProperties", None)
    if out.get("type") == "object" and "properties" in out and out.get("default") is not None:
        out["default"] = {}
    if out.get("default", 0) is None:
        del out["default"]
    if "properties" in out and out.get("type") is None:
        out["type"] = "object"
    return out


def _off_by_default(node: dict[str, Any]) -> bool:
    """An object whose absence means something (``tls: TlsSpec | None = None``: no TLS)
    must not be defaulted into existence."""
    return "default" in node and node["default"] is None


def _defaulted(node: dict[str, Any], required: bool) -> dict[str, Any]:
    """An optional typed object defaults to ``{}`` so Kubernetes defaults its fields too,
    unless it is off by default."""
    if not required and node.get("type") == "object" and "properties" in node:
        node["default"] = {}
    return node


def _resolve(node: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    """Inline ``$ref``, collapse ``allOf: [x]`` and drop the ``null`` branch of optionals;
    the node's own keys (description, default) win over the referenced schema's."""
    node = dict(node)
    if "$ref" in node:
        target = defs[node.pop("$ref").rsplit("/", 1)[-1]]
        node = {**_resolve(target, defs), **node}
    if "allOf" in node and len(node["allOf"]) == 1:
        node = {**_resolve(node.pop("allOf")[0], defs), **node}
    if "anyOf" in node and not node.get("x-kubernetes-int-or-string"):
        branches = [b for b in node["anyOf"] if b.get("type") != "null"]
        if len(branches) == 1:
            del node["anyOf"]
            node = {**_resolve(branches[0], defs), **node}
    return node
