"""Message bodies that carry a unique ID and prove their own integrity.

A body is ``<id>|<filler>`` where the filler is binary (NUL, newlines, high bytes),
derived from the ID and 0..255 bytes long, so a truncated or corrupted body is caught.
Imported by the client scripts (same folder) and by the tests.
"""
from __future__ import annotations

import hashlib

SEPARATOR = b"|"


def message_id(prefix: str, index: int) -> str:
    return f"{prefix}-{index:06d}"


def _filler(ident: bytes) -> bytes:
    digest = hashlib.sha256(ident).digest()
    return (digest * 8)[: digest[0]]


def make_body(ident: str) -> bytes:
    raw = ident.encode("ascii")
    return raw + SEPARATOR + _filler(raw)


def read_body(body: bytes) -> tuple[str, bool]:
    """Return (id, intact) for a body built by :func:`make_body`."""
    raw, sep, filler = body.partition(SEPARATOR)
    ident = raw.decode("ascii", "replace")
    return ident, bool(sep) and filler == _filler(raw)


WARMUP_PREFIX = "warmup"


def is_warmup(ident: str) -> bool:
    """Warm-up messages are always finished: a consumer that starts at RDY 1 and only
    raises it after a first successful FIN (gnsq) would otherwise crawl through a test
    whose handler holds every first attempt."""
    return ident.startswith(WARMUP_PREFIX + "-")
