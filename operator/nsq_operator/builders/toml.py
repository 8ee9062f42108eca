"""The few TOML shapes NSQ's config files need: strings, integers, floats, booleans and
flat lists of them. The standard library reads TOML but does not write it."""
from __future__ import annotations

import json
from typing import Any


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)  # a JSON string is a valid TOML basic string
    if isinstance(value, list):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    raise TypeError(f"cannot write {type(value).__name__} to TOML")


def dumps(values: dict[str, Any]) -> str:
    return "".join(f"{key} = {_value(value)}\n" for key, value in values.items())
