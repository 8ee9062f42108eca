"""Comparing two JSON answers by their keys, at every depth."""
from __future__ import annotations

from typing import Any


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    return type(value).__name__


def shape_differences(expected: Any, actual: Any, path: str = "$") -> list[str]:
    """Where ``actual`` has other keys or kinds of value than ``expected``. A null stands
    for an empty list or object (Go writes nil slices as null); list items are compared
    with their counterparts, up to the shorter list."""
    a, b = _kind(expected), _kind(actual)
    if "null" in (a, b):
        return [] if {a, b} <= {"null", "list", "dict"} else [f"{path}: {a} vs {b}"]
    if a != b:
        return [f"{path}: {a} vs {b}"]
    if isinstance(expected, dict):
        out = []
        missing, extra = expected.keys() - actual.keys(), actual.keys() - expected.keys()
        if missing:
            out.append(f"{path}: missing keys {sorted(missing)}")
        if extra:
            out.append(f"{path}: extra keys {sorted(extra)}")
        for key in expected.keys() & actual.keys():
            out += shape_differences(expected[key], actual[key], f"{path}.{key}")
        return out
    if isinstance(expected, list):
        out = []
        for i, (x, y) in enumerate(zip(expected, actual)):
            out += shape_differences(x, y, f"{path}[{i}]")
        return out
    return []
