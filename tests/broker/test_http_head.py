"""The request-head parser of nsqd's HTTP server (``nsqd.http_head``), without sockets:
its quick path reads the usual heads exactly as h11 does, and leaves every other head to
h11, so a head gets the same reading, or the same refusal, whichever path it takes."""
from __future__ import annotations

import h11
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from nsqd.http_head import CHUNKED, MAX_HEADER_BYTES, _by_h11, _quick, head_end, parse_head, refuse_incomplete


def test_the_usual_publish_head_is_read_by_the_quick_path() -> None:
    head = b"POST /pub?topic=t HTTP/1.1\r\nHost: x\r\nContent-Length: 200\r\nX-A: one\r\nx-a:  two \r\n\r\n"
    quick = _quick(head)
    assert quick is not None
    assert (quick.method, quick.target, quick.version, quick.body_length) == ("POST", "/pub?topic=t", b"1.1", 200)
    assert quick.headers == {"host": "x", "content-length": "200", "x-a": "one, two"}
    assert quick == _by_h11(head, closed=False)


@pytest.mark.parametrize("head", [
    b"GET / HTTP/1.1\nHost: x\n\n",  # bare LF lines: h11 reads them
    b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 3, 3\r\n\r\n",
    b"GET / HTTP/1.1\r\nHost: x\r\nX: a\r\n folded\r\n\r\n",
    b"GET / HTTP/2.0\r\nHost: x\r\n\r\n",
])
def test_heads_out_of_the_ordinary_go_to_h11(head: bytes) -> None:
    assert _quick(head) is None
    try:
        expected = _by_h11(head, closed=False)
    except h11.RemoteProtocolError as e:
        with pytest.raises(h11.RemoteProtocolError) as refused:
            parse_head(head)
        assert refused.value.error_status_hint == e.error_status_hint
    else:
        assert parse_head(head) == expected


def test_chunked_and_expect_continue_are_announced() -> None:
    head = parse_head(b"POST /mpub?topic=t HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: Chunked\r\n"
                      b"Expect: 100-continue\r\n\r\n")
    assert head.body_length == CHUNKED and head.expects_continue
    assert not parse_head(b"POST / HTTP/1.0\r\nExpect: 100-continue\r\n\r\n").expects_continue


def test_incomplete_heads_are_refused_as_h11_refuses_them() -> None:
    assert refuse_incomplete(b"\x16\x03\x01\x02\x00", closed=False).error_status_hint == 400  # a TLS hello
    assert refuse_incomplete(b"GET / HTTP/1.1\r\nHost: x\r\n", closed=True).error_status_hint == 400
    too_long = b"GET / HTTP/1.1\r\nX: " + b"a" * (MAX_HEADER_BYTES + 1)
    assert refuse_incomplete(too_long, closed=False).error_status_hint == 431


def test_the_head_ends_where_h11_sees_its_blank_line() -> None:
    assert head_end(b"GET / HTTP/1.1\r\nHost: x\r\n\r\nbody") == 27
    assert head_end(b"GET / HTTP/1.1\nHost: x\n\r\nbody") == 25
    assert head_end(b"GET / HTTP/1.1\r\nHost: x\r\n") == -1


LINES = [b"GET /ping HTTP/1.1", b"POST /pub?topic=t HTTP/1.1", b"GET /stats HTTP/1.0", b"PUT  / HTTP/1.1",
         b"GET / HTTP/1.2", b"G@T / HTTP/1.1", b"GET /\x7f HTTP/1.1"]
HEADERS = [b"Host: x", b"host:y", b"Content-Length: 3", b"Content-Length: 4", b"content-length: 03",
           b"Content-Length: -1", b"Content-Length: 3, 3", b"Transfer-Encoding: chunked", b"Transfer-Encoding: gzip",
           b"Transfer-Encoding: CHUNKED", b"Expect: 100-continue", b"Expect: foo, 100-Continue", b"Connection: close",
           b"X-Tab:\tv\t", b"X-Empty:", b"X-Space :v", b" folded", b"X-Ctl: a\x01b", b"X-High: \xe9t\xe9",
           b"X-Del: \x7f", b"no colon"]


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(LINES), st.lists(st.sampled_from(HEADERS), max_size=6))
@example(b"GET /ping HTTP/1.1", [b"Host: x", b"X-Space :v"])
def test_any_head_gets_the_reading_or_refusal_h11_gives_it(line: bytes, headers: list[bytes]) -> None:
    head = b"\r\n".join([line, *headers]) + b"\r\n\r\n"
    try:
        expected = _by_h11(head, closed=False)
    except h11.RemoteProtocolError as e:
        with pytest.raises(h11.RemoteProtocolError) as refused:
            parse_head(head)
        assert refused.value.error_status_hint == e.error_status_hint
        assert _quick(head) is None
    else:
        assert parse_head(head) == expected
