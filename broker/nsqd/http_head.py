"""A request's head (request line and headers), sans-IO: found in a receive buffer and
parsed, with the body's framing it announces.

The usual head (CRLF lines, HTTP/1.0 or 1.1, plain tokens and visible values, at most one
Content-Length of digits, no Transfer-Encoding or just ``chunked``) is parsed here. Any
other head goes to h11, which either refuses it (``h11.RemoteProtocolError`` with the
status to answer) or reads it its own way, so what is accepted and refused is h11's
judgement whichever path a head takes; the quick one only accepts what h11 accepts.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import h11

MAX_HEADER_BYTES = 64 * 1024  # a request line and headers still incomplete past this: 431

_BLANK_LINE = re.compile(rb"\n\r?\n")  # where h11 sees a head end (it takes bare LF lines too)
_TOKEN = rb"[-!#$%&'*+.^_`|~0-9A-Za-z]+"
# the request line and every header line of the usual head, checked in one match: a
# header's value, once the spaces and tabs around it are stripped, is any run of visible
# characters, spaces and tabs (h11's field-value)
_USUAL_HEAD = re.compile(rb"(?:" + _TOKEN + rb") [\x21-\x7e]+ HTTP/1\.[01]\r\n(?:" + _TOKEN
                         + rb":[\t\x20-\x7e\x80-\xff]*\r\n)*\r\n")
_DIGITS = re.compile(rb"[0-9]{1,20}\Z")
CHUNKED = -1  # ``RequestHead.body_length`` of a chunked body


@dataclass(slots=True)
class RequestHead:
    method: str
    target: str
    version: bytes  # b"1.0", b"1.1" (h11 takes any digit.digit; the server refuses others)
    headers: dict[str, str]  # lower-case names, repeated ones joined with ", "; read only (shared by
    # the requests of a connection that repeat the same head)
    body_length: int  # bytes of a Content-Length body (0 without one), or CHUNKED
    expects_continue: bool  # HTTP/1.1 ``Expect: 100-continue``


def head_end(buf: bytes | bytearray) -> int:
    """Where the head at the front of ``buf`` ends (after its blank line); -1 while it is
    incomplete."""
    match = _BLANK_LINE.search(buf)
    return match.end() if match else -1


def obviously_not_a_request(buf: bytes | bytearray) -> bool:
    """A first byte no request line starts with (h11 refuses it before the line is whole:
    a TLS handshake on the plain port is answered 400 at once)."""
    return bool(buf) and buf[0] < 0x21


def parse_head(head: bytes) -> RequestHead:
    """The head ``head_end`` found; raises ``h11.RemoteProtocolError`` with h11's status."""
    return _quick(head) or _by_h11(head, closed=False)


def refuse_incomplete(buf: bytes, closed: bool) -> h11.RemoteProtocolError:
    """h11's refusal of an incomplete head: too long, not a request, or cut off by the
    peer's end of input (``closed``)."""
    try:
        _by_h11(buf, closed)
    except h11.RemoteProtocolError as e:
        return e
    return h11.RemoteProtocolError("incomplete request head", error_status_hint=400)


def _quick(head: bytes) -> RequestHead | None:
    if not _USUAL_HEAD.fullmatch(head):
        return None
    lines = head[:-4].split(b"\r\n")
    method, target, version = lines[0].split(b" ")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        key, text = name.decode("ascii").lower(), value.strip(b" \t").decode("latin-1")
        if key in headers:
            if key in ("host", "content-length", "transfer-encoding"):
                return None  # h11's rules for repeats
            headers[key] = f"{headers[key]}, {text}"
        else:
            headers[key] = text
    is_11 = version == b"HTTP/1.1"
    if is_11 and "host" not in headers:
        return None
    length = headers.get("content-length")
    encoding = headers.get("transfer-encoding")
    if encoding is not None:
        if length is not None or encoding.lower() != "chunked":
            return None
        headers["transfer-encoding"] = "chunked"  # as h11 reads it: the coding's name is case-blind
        body_length = CHUNKED
    elif length is not None:
        if not _DIGITS.match(length.encode("latin-1")):
            return None
        body_length = int(length)
    else:
        body_length = 0
    return RequestHead(method.decode("ascii"), target.decode("ascii"), version[5:], headers, body_length,
                       is_11 and _expects_continue(headers))


def _by_h11(data: bytes, closed: bool) -> RequestHead:
    parser = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEADER_BYTES)
    parser.receive_data(data)
    if closed:
        parser.receive_data(b"")
    event = parser.next_event()
    if not isinstance(event, h11.Request):
        raise h11.RemoteProtocolError("incomplete request head", error_status_hint=400)
    headers: dict[str, str] = {}
    for name, value in event.headers:
        key, text = name.decode("latin-1"), value.decode("latin-1")
        headers[key] = f"{headers[key]}, {text}" if key in headers else text
    if "transfer-encoding" in headers:
        body_length = CHUNKED  # h11 takes no other encoding
    else:
        body_length = int(headers.get("content-length", "0"))
    return RequestHead(event.method.decode("ascii"), event.target.decode("latin-1"), event.http_version,
                       headers, body_length, parser.they_are_waiting_for_100_continue)


def _expects_continue(headers: dict[str, str]) -> bool:
    expect = headers.get("expect")
    return expect is not None and any(token.strip().lower() == "100-continue" for token in expect.split(","))
