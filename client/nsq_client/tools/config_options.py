"""``--consumer-opt`` / ``--producer-opt``: options passed through onto :class:`Config`.

Each value names one option and its value, as ``key=value`` or as NSQ's tools write it,
``key,value``; a bare ``key`` sets a boolean option to true (``--consumer-opt=snappy``).
Values are strings interpreted as go-nsq does: durations in Go's syntax (``"5s"``),
booleans as ``true``/``false``. Option names are go-nsq's (``max_attempts``,
``heartbeat_interval``, ``tls_v1`` ...), the fields of :class:`Config`.
"""
from __future__ import annotations

from typing import Any, Sequence

from pydantic import ValidationError

from nsq_protocol.flags import FlagError

from ..config import Config

_NOT_FROM_TEXT = {"tls_context"}  # an object, not something a command line can give


def parse_config_options(values: Sequence[str], flag: str) -> dict[str, Any]:
    """``["max_attempts=10", "snappy"]`` -> ``{"max_attempts": "10", "snappy": True}``."""
    settings: dict[str, Any] = {}
    for value in values:
        key, setting = _split(value)
        if key not in Config.model_fields or key in _NOT_FROM_TEXT:
            raise FlagError(f"invalid value {value!r} for flag -{flag}: unknown option {key!r}")
        settings[key] = setting
    return settings


def build_config(values: Sequence[str], flag: str, *, defaults: dict[str, Any] | None = None,
                 overrides: dict[str, Any] | None = None) -> Config:
    """A :class:`Config` from the tool's ``defaults``, then the passthrough values, then
    ``overrides`` (the tool's own flags, which win as in NSQ's tools), checked as a whole."""
    settings = {**(defaults or {}), **parse_config_options(values, flag), **(overrides or {})}
    try:
        return Config(**settings)
    except ValidationError as err:
        first = err.errors()[0]
        key = str(first["loc"][0]) if first["loc"] else ""
        message = first["msg"].removeprefix("Value error, ")
        given = next((v for v in values if _key_of(v) == key), None)
        if given is None:  # options that are fine alone but not together
            raise FlagError(f"invalid values for flag -{flag}: {message}") from None
        raise FlagError(f"invalid value {given!r} for flag -{flag}: {message}") from None


def _split(value: str) -> tuple[str, Any]:
    """Option names hold neither ``=`` nor ``,``: the first of them ends the name."""
    cut = min((i for i in (value.find("="), value.find(",")) if i >= 0), default=-1)
    if cut < 0:
        return value.strip(), True
    return value[:cut].strip(), value[cut + 1:]


def _key_of(value: str) -> str:
    return _split(value)[0]
