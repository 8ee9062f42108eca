"""Query strings read the way Go's ``url.ParseQuery`` reads them, so that the same URLs
are accepted and refused as by Go's nsqd and nsqlookupd, whose HTTP APIs both use it:
``+`` is a space, a ``%`` must start a two-digit hex escape, a ``;`` in a pair is an
error, and the first value of a key wins.
"""
from __future__ import annotations

import re

_ESCAPE = re.compile(rb"%([0-9A-Fa-f]{2})")


class QueryError(ValueError):
    """The query string is malformed (NSQ's HTTP APIs answer 400 INVALID_REQUEST)."""


def _unescape(text: str) -> str:
    raw = text.replace("+", " ").encode("utf-8", "surrogateescape")
    if raw.count(b"%") != len(_ESCAPE.findall(raw)):
        raise QueryError(f"invalid URL escape in {text!r}")
    return _ESCAPE.sub(lambda m: bytes([int(m.group(1), 16)]), raw).decode("utf-8", "replace")


def parse_query(query: str) -> dict[str, list[str]]:
    """Every key's values, in order; QueryError on the first malformed pair, after
    reading them all (as Go does)."""
    values: dict[str, list[str]] = {}
    error: QueryError | None = None
    for pair in query.split("&"):
        if ";" in pair:
            error = error or QueryError("invalid semicolon separator in query")
            continue
        if not pair:
            continue
        key, _, value = pair.partition("=")
        try:
            values.setdefault(_unescape(key), []).append(_unescape(value))
        except QueryError as e:
            error = error or e
    if error is not None:
        raise error
    return values


def first(values: dict[str, list[str]], key: str) -> str | None:
    """The first value given for ``key`` (possibly empty), or None when it is absent."""
    found = values.get(key)
    return found[0] if found else None
