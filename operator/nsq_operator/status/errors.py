"""A pydantic ValidationError as one line that names every bad field by its path."""
from __future__ import annotations

from pydantic import ValidationError


class BadSpec(Exception):
    """A spec the operator cannot act on; the message names the field."""


def describe(error: ValidationError, prefix: str = "spec") -> str:
    parts = []
    for item in error.errors():
        path = ".".join([prefix, *(str(p) for p in item["loc"])]) if item["loc"] else prefix
        parts.append(f"{path}: {item['msg']}")
    return "; ".join(parts)
