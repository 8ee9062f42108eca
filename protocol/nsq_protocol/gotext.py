"""Client bytes in error texts, shown the way Go's nsqd and nsqlookupd show them, so a
client logs the same text from ours as from Go's.

Go formats a name with ``%q`` (``"t!"``) or ``'%s'`` and a number it could not parse with
``%s`` (the raw bytes). :func:`raw` keeps bytes that are not UTF-8 as they came (the
text is encoded back with ``surrogateescape`` by :attr:`ProtocolError.wire_text`).
"""
from __future__ import annotations

_NAMED_ESCAPES = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t",
                  "\v": "\\v", '"': '\\"', "\\": "\\\\"}


def raw(value: bytes) -> str:
    """Go's ``%s`` of a byte slice: the bytes as they are."""
    return value.decode("utf-8", "surrogateescape")


def quoted(value: bytes) -> str:
    """Go's ``%q`` (``strconv.Quote``): double quotes, printable characters as they are,
    Go's escapes for the rest and ``\\xNN`` for each byte that is not UTF-8."""
    out = ['"']
    for char in value.decode("utf-8", "surrogateescape"):
        code = ord(char)
        if 0xDC80 <= code <= 0xDCFF:  # a byte that is not UTF-8
            out.append(f"\\x{code - 0xDC00:02x}")
        elif char in _NAMED_ESCAPES:
            out.append(_NAMED_ESCAPES[char])
        elif char.isprintable():
            out.append(char)
        elif code < 0x20 or code == 0x7F:
            out.append(f"\\x{code:02x}")
        elif code < 0x10000:
            out.append(f"\\u{code:04x}")
        else:
            out.append(f"\\U{code:08x}")
    out.append('"')
    return "".join(out)
