"""NSQ's config files as TOML, written by tomli-w (the writer paired with the standard
library's reader), and the one fixed text of their values that hashes are taken over."""
from __future__ import annotations

import json
from typing import Any

import tomli_w


def dumps(values: dict[str, Any]) -> str:
    return tomli_w.dumps(values)


def _canonical_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(_canonical_value(v) for v in value) + "]"
    raise TypeError(f"cannot hash {type(value).__name__} as a config value")


def canonical(values: dict[str, Any]) -> str:
    """The values as one fixed text, whatever writer makes the file: a hash over it moves
    only when a value does. (It is the form the config files had before tomli-w, so the
    hashes of existing clusters stayed the same across the switch.)"""
    return "".join(f"{key} = {_canonical_value(value)}\n" for key, value in values.items())
