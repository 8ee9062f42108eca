"""nsqd's HTTP server on the wire, over raw sockets: keep-alive and pipelined requests,
chunked bodies, ``Expect: 100-continue``, body limits on chunked and announced bodies,
HTTP/1.0, and malformed requests (a 400 and a close, nsqd carrying on). Bytes in, bytes
out: nothing here knows how the server is built."""
from __future__ import annotations

import re
import socket
import time
from dataclasses import dataclass
from email.utils import parsedate_to_datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.broker.conftest import Connect
from tests.servers import Nsqd, http

HEAD_END = b"\r\n\r\n"


@dataclass
class Answer:
    version: bytes
    status: int
    headers: dict[str, str]  # names in lower case
    body: bytes


class Client:
    """One raw connection: bytes out, answers read one at a time."""

    def __init__(self, server: Nsqd) -> None:
        self.sock = socket.create_connection((server.host, server.http_port), timeout=5)
        self.pending = b""

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def _fill(self) -> bool:
        chunk = self.sock.recv(65536)
        self.pending += chunk
        return bool(chunk)

    def answer(self, head_request: bool = False) -> Answer:
        while HEAD_END not in self.pending:
            assert self._fill(), f"closed before an answer; got {self.pending!r}"
        head, self.pending = self.pending.split(HEAD_END, 1)
        status_line, *lines = head.decode("latin-1").split("\r\n")
        version, status = re.match(r"HTTP/(1\.[01]) (\d{3}) ", status_line + " ").groups()  # type: ignore[union-attr]
        headers = {}
        for line in lines:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        length = 0 if head_request else int(headers.get("content-length", "0"))
        while len(self.pending) < length:
            assert self._fill(), "closed inside a body"
        body, self.pending = self.pending[:length], self.pending[length:]
        return Answer(version.encode(), int(status), headers, body)

    def closed(self) -> bool:
        """The server closes the connection (within the socket timeout) with nothing more sent."""
        try:
            return not self._fill() and not self.pending
        except ConnectionResetError:
            return not self.pending

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def client_of() -> object:
    opened: list[Client] = []

    def open_client(server: Nsqd) -> Client:
        opened.append(Client(server))
        return opened[-1]

    yield open_client
    for c in opened:
        c.close()


def pub(topic: str, body: bytes, extra: str = "") -> bytes:
    return (f"POST /pub?topic={topic} HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n{extra}\r\n".encode()
            + body)


def chunked(path: str, chunks: list[bytes]) -> bytes:
    framed = b"".join(b"%x\r\n%s\r\n" % (len(c), c) for c in chunks)
    return f"POST {path} HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n".encode() + framed + b"0\r\n\r\n"


def error_of(answer: Answer) -> tuple[int, bytes]:
    return answer.status, answer.body


def test_keep_alive_serves_one_request_after_another(nsqd: Nsqd, topic: str, client_of) -> None:  # type: ignore[no-untyped-def]
    c = client_of(nsqd)
    for i in range(3):
        c.send(pub(topic, b"m%d" % i))
        answer = c.answer()
        assert (answer.status, answer.body, answer.version) == (200, b"OK", b"1.1")
        assert "connection" not in answer.headers
    assert nsqd.topic(topic)["depth"] == 3


def test_answers_carry_the_current_date_in_http_form(nsqd: Nsqd, client_of) -> None:  # type: ignore[no-untyped-def]
    c = client_of(nsqd)
    c.send(b"GET /ping HTTP/1.1\r\nHost: x\r\n\r\n")
    date = c.answer().headers["date"]
    assert re.fullmatch(r"(Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d\d [A-Z][a-z]{2} \d{4} \d\d:\d\d:\d\d GMT", date)
    assert abs(parsedate_to_datetime(date).timestamp() - time.time()) < 5


def test_pipelined_requests_are_answered_in_order(nsqd: Nsqd, topic: str, client_of) -> None:  # type: ignore[no-untyped-def]
    c = client_of(nsqd)
    c.send(b"GET /ping HTTP/1.1\r\nHost: x\r\n\r\n" + pub(topic, b"one")
           + b"GET /config/msg_timeout HTTP/1.1\r\nHost: x\r\n\r\n" + b"HEAD /ping HTTP/1.1\r\nHost: x\r\n\r\n"
           + b"GET /nope HTTP/1.1\r\nHost: x\r\n\r\n" + chunked(f"/pub?topic={topic}", [b"tw", b"o"]))
    answers = [c.answer(), c.answer(), c.answer(), c.answer(head_request=True), c.answer(), c.answer()]
    assert [(a.status, a.body) for a in answers] == [
        (200, b"OK"), (200, b"OK"), (200, b"60000000000"), (405, b""), (404, b'{"message":"NOT_FOUND"}'), (200, b"OK")]
    assert answers[3].headers["content-length"] == "32"  # what a GET would carry, body left out
    assert nsqd.topic(topic)["depth"] == 2


def test_a_request_sent_a_byte_at_a_time_and_repeated_heads_are_served(  # type: ignore[no-untyped-def]
        nsqd: Nsqd, topic: str, client_of, connect: Connect) -> None:
    """Heads and bodies cut anywhere, and the same head again with other bodies (a
    keep-alive publisher's usual stream): each body is its own message."""
    assert nsqd.post(f"/topic/create?topic={topic}").status == 200
    assert nsqd.post(f"/channel/create?topic={topic}&channel=ch").status == 200
    c = client_of(nsqd)
    c.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    for byte in pub(topic, b"abc"):
        c.send(bytes([byte]))
    assert error_of(c.answer()) == (200, b"OK")
    c.send(pub(topic, b"xyz") + pub(topic, b"123"))  # same head, pipelined
    assert [error_of(c.answer()) for _ in range(2)] == [(200, b"OK")] * 2
    c.send(b"POST /pub?topic=" + topic.encode() + b" HTTP/1.1\nHost: x\nContent-Length: 2\n\nlf")  # bare LF: h11 reads it
    assert error_of(c.answer()) == (200, b"OK")
    sub = connect(nsqd)
    sub.sub(topic, "ch")
    sub.expect_ok()
    sub.rdy(10)
    assert [m.body for m in sub.read_messages(4)] == [b"abc", b"xyz", b"123", b"lf"]


def test_a_tls_hello_on_the_plain_port_is_refused_at_once(nsqd: Nsqd, client_of) -> None:  # type: ignore[no-untyped-def]
    c = client_of(nsqd)
    c.send(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03")  # no line end: nothing waits for one
    answer = c.answer()
    assert (answer.status, answer.body, answer.headers["connection"]) == (400, b"400 Bad Request", "close")
    assert c.closed()


def test_a_head_cut_off_by_the_end_of_input_is_400(nsqd: Nsqd, client_of) -> None:  # type: ignore[no-untyped-def]
    c = client_of(nsqd)
    c.send(b"GET /ping HTTP/1.1\r\nHost: x\r\n\r\nGET /ping HTTP/1.1\r\nHost")
    c.sock.shutdown(socket.SHUT_WR)
    assert error_of(c.answer()) == (200, b"OK")  # the whole request before it is answered
    assert c.answer().status == 400
    assert c.closed()


def test_a_chunked_body_is_published_whole(nsqd: Nsqd, topic: str, client_of, connect: Connect) -> None:  # type: ignore[no-untyped-def]
    assert nsqd.post(f"/topic/create?topic={topic}").status == 200
    assert nsqd.post(f"/channel/create?topic={topic}&channel=ch").status == 200
    c = client_of(nsqd)
    c.send(chunked(f"/pub?topic={topic}", [b"hel", b"lo ", b"w" * 3000]))
    assert error_of(c.answer()) == (200, b"OK")
    c.send(chunked(f"/mpub?topic={topic}", [b"a\nb", b"b\n", b"c"]))
    assert error_of(c.answer()) == (200, b"OK")
    sub = connect(nsqd)
    sub.sub(topic, "ch")
    sub.expect_ok()
    sub.rdy(10)
    assert [m.body for m in sub.read_messages(4)] == [b"hello " + b"w" * 3000, b"a", b"bb", b"c"]


def test_expect_100_continue_is_answered_before_the_body(nsqd: Nsqd, topic: str, client_of) -> None:  # type: ignore[no-untyped-def]
    c = client_of(nsqd)
    c.send(f"POST /pub?topic={topic} HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n".encode())
    interim = c.answer()
    assert (interim.status, interim.body) == (100, b"")
    c.send(b"hello")
    assert error_of(c.answer()) == (200, b"OK")
    c.send(b"GET /ping HTTP/1.1\r\nHost: x\r\n\r\n")  # the connection goes on
    assert error_of(c.answer()) == (200, b"OK")


def test_a_body_announced_too_long_is_refused_unread_and_the_connection_closed(limited: Nsqd, topic: str,  # type: ignore[no-untyped-def]
                                                                              client_of) -> None:
    c = client_of(limited)
    c.send(f"POST /mpub?topic={topic} HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000000\r\n\r\n".encode() + b"x" * 100)
    answer = c.answer()
    assert error_of(answer) == (413, b'{"message":"BODY_TOO_BIG"}')
    assert answer.headers["connection"] == "close"
    assert c.closed()
    # with Expect, the client is refused before it sends anything
    c = client_of(limited)
    c.send(f"POST /pub?topic={topic} HTTP/1.1\r\nHost: x\r\nContent-Length: 2000\r\nExpect: 100-continue\r\n\r\n".encode())
    assert error_of(c.answer()) == (413, b'{"message":"MSG_TOO_BIG"}')
    assert c.closed()


def test_a_chunked_body_over_the_limit_is_413(limited: Nsqd, topic: str, client_of) -> None:  # type: ignore[no-untyped-def]
    c = client_of(limited)
    c.send(chunked(f"/pub?topic={topic}", [b"x" * 1000, b"y" * 25]))  # 1025 > --max-msg-size 1024
    assert error_of(c.answer()) == (413, b'{"message":"MSG_TOO_BIG"}')
    c.send(chunked(f"/mpub?topic={topic}", [b"z\n" * 1000] * 3))  # 6000 > --max-body-size 4096
    assert error_of(c.answer()) == (413, b'{"message":"BODY_TOO_BIG"}')
    c.send(b"GET /ping HTTP/1.1\r\nHost: x\r\n\r\n")  # small leftovers are skipped: still open
    assert error_of(c.answer()) == (200, b"OK")
    # a body that runs far over is not read to its end: the answer closes the connection
    c.send(f"POST /pub?topic={topic} HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n".encode())
    c.send(b"".join(b"4000\r\n" + b"q" * 0x4000 + b"\r\n" for _ in range(20)))  # 320 KiB, no end
    answer = c.answer()
    assert error_of(answer) == (413, b'{"message":"MSG_TOO_BIG"}') and answer.headers["connection"] == "close"
    assert c.closed()
    assert limited.topic(topic) is None or limited.topic(topic)["depth"] == 0


def test_http_1_0_gets_a_1_0_answer_and_a_close(nsqd: Nsqd, client_of) -> None:  # type: ignore[no-untyped-def]
    c = client_of(nsqd)
    c.send(b"GET /ping HTTP/1.0\r\n\r\n")
    answer = c.answer()
    assert (answer.version, answer.status, answer.body) == (b"1.0", 200, b"OK")
    assert c.closed()


MALFORMED = [
    b"GARBAGE\r\n\r\n",
    b"GET /ping HTTP/1.1\r\n\r\n",  # no Host
    b"GET /ping HTTP/1.1\r\nHost: x\r\nno colon here\r\n\r\n",
    b"POST /pub?topic=t HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n",
    b"POST /pub?topic=t HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nhi",
    b"GET /ping HTTP/9.9\r\nHost: x\r\n\r\n",
    b"POST /pub?topic=t HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhi\r\n0\r\n\r\n",
    b"POST /pub?topic=t HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n",
]


@pytest.mark.parametrize("data", MALFORMED, ids=range(len(MALFORMED)))
def test_a_malformed_request_is_400_and_a_close(nsqd: Nsqd, client_of, data: bytes) -> None:  # type: ignore[no-untyped-def]
    c = client_of(nsqd)
    c.send(data)
    answer = c.answer()
    assert answer.status in {400, 501, 505} and answer.headers["connection"] == "close"
    assert answer.body.startswith(str(answer.status).encode())
    assert c.closed()
    assert http("GET", nsqd.url("/ping")) == (200, b"OK")


def test_headers_over_the_limit_are_431(nsqd: Nsqd, client_of) -> None:  # type: ignore[no-untyped-def]
    c = client_of(nsqd)
    c.send(b"GET /ping HTTP/1.1\r\nHost: x\r\nX-Big: " + b"b" * 300_000 + b"\r\n\r\n")
    answer = c.answer()
    assert (answer.status, answer.body) == (431, b"431 Request Header Fields Too Large")
    assert c.closed()


# -- fuzz ----------------------------------------------------------------------------------
PIECES = [b"GET /ping HTTP/1.1\r\n", b"POST /pub?topic=fz HTTP/1.1\r\n", b"POST /mpub?topic=fz&binary=1 HTTP/1.1\r\n",
          b"GET /stats?format=json&topic=fz HTTP/1.0\r\n",
          b"Host: x\r\n", b"Content-Length: 3\r\n", b"Content-Length: -1\r\n", b"Transfer-Encoding: chunked\r\n",
          b"Expect: 100-continue\r\n", b"Connection: close\r\n", b"\r\n", b"abc", b"3\r\nabc\r\n", b"0\r\n\r\n",
          b"ffffffff\r\n", b"\x00\x00\x00\x01\x00\x00\x00\x02hi", b" \t", b"\xff\xfe", b"%zz"]
STATUS_LINE = re.compile(rb"HTTP/1\.[01] (\d{3}) ")


@settings(max_examples=60, deadline=None)
@given(data=st.one_of(st.binary(min_size=1, max_size=400),
                      st.lists(st.sampled_from(PIECES), min_size=1, max_size=12).map(b"".join)))
def test_any_bytes_get_http_answers_or_a_close_and_nsqd_carries_on(nsqd: Nsqd, data: bytes) -> None:
    with socket.create_connection((nsqd.host, nsqd.http_port), timeout=3) as s:
        s.sendall(data)
        s.shutdown(socket.SHUT_WR)  # all sent: the server sees the end of its input
        got = b""
        try:
            while chunk := s.recv(65536):
                got += chunk
        except ConnectionResetError:
            pass
    statuses = [int(m.group(1)) for m in STATUS_LINE.finditer(got)]
    assert not got or got.startswith(b"HTTP/1."), got[:200]
    assert all(status < 500 or status == 501 for status in statuses), got[:2000]
    assert http("GET", nsqd.url("/ping")) == (200, b"OK")


def _same_answer(a: Answer, b: Answer) -> bool:
    """Equal but for the Date header."""
    return (a.version, a.status, a.body, {k: v for k, v in a.headers.items() if k != "date"}) == \
        (b.version, b.status, b.body, {k: v for k, v in b.headers.items() if k != "date"})


def _post(target: str, body: bytes) -> bytes:
    return f"POST {target} HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body


@pytest.mark.parametrize("server,target,body,expected", [
    ("nsqd", "/pub?topic={t}", b"m", (200, b"OK")),
    ("nsqd", "/pub?topic={t}&defer=100", b"m", (200, b"OK")),
    ("nsqd", "/pub?topic={t}&topic=other", b"m", (200, b"OK")),
    ("nsqd", "/pub?topic=%74%2D{t}&x=%zz", b"m", (400, b'{"message":"INVALID_REQUEST"}')),
    ("limited", "/pub?topic={t}&defer=1001", b"m", (400, b'{"message":"INVALID_DEFER"}')),
    ("limited", "/pub?topic={t}", b"x" * 1025, (413, b'{"message":"MSG_TOO_BIG"}')),
    ("nsqd", "/mpub?topic={t}", b"a\nb\n", (200, b"OK")),
    ("nsqd", "/mpub?topic={t}&binary=1", b"\x00\x00\x00\x01\x00\x00\x00\x01a", (200, b"OK")),
    ("nsqd", "/mpub?topic={t}&binary=1", b"\x00\x00\x00\x02\x00\x00\x00\x01a", (413, b'{"message":"BAD_MESSAGE"}')),
    ("limited", "/mpub?topic={t}", b"y" * 1025 + b"\nok", (413, b'{"message":"MSG_TOO_BIG"}')),
    ("nsqd", "/mpub?topic={t}&binary=false", b"\x00\x00\x00\x01\x00\x00\x00\x01a", (200, b"OK")),
])
def test_a_keep_alive_publisher_repeating_its_request_gets_the_same_answers(  # type: ignore[no-untyped-def]
        request, client_of, topic: str, server: str, target: str, body: bytes, expected: tuple[int, bytes]) -> None:
    """The second and later requests repeating a head (which nsqd may answer from a fast
    lane) get what the first got, counted alike in the topic's stats."""
    nsqd: Nsqd = request.getfixturevalue(server)
    nsqd.post(f"/topic/create?topic={topic}")  # the fast lane only publishes to topics that exist
    c = client_of(nsqd)
    data = _post(target.format(t=topic), body)
    c.send(data)
    first = c.answer()
    assert error_of(first) == expected
    count = nsqd.topic(topic)["message_count"]  # type: ignore[index]
    for _ in range(3):
        c.send(data)
        assert _same_answer(c.answer(), first)
    c.send(data * 3)  # pipelined, in one piece
    assert all(_same_answer(c.answer(), first) for _ in range(3))
    assert nsqd.topic(topic)["message_count"] == count * 7  # type: ignore[index]


def test_a_repeated_publish_follows_the_topic_and_the_node(nsqd: Nsqd, topic: str, client_of, connect: Connect) -> None:  # type: ignore[no-untyped-def]
    """A repeated head is judged again each time: a deleted topic is made again, a paused
    one keeps the messages, every message arrives once, in order."""
    c = client_of(nsqd)
    c.send(pub(topic, b"m0"))
    assert error_of(c.answer()) == (200, b"OK")
    assert nsqd.post(f"/topic/delete?topic={topic}").status == 200
    c.send(pub(topic, b"m1"))
    assert error_of(c.answer()) == (200, b"OK")
    assert nsqd.topic(topic)["message_count"] == 1  # type: ignore[index]
    assert nsqd.post(f"/channel/create?topic={topic}&channel=ch").status == 200
    assert nsqd.post(f"/topic/pause?topic={topic}").status == 200
    c.send(pub(topic, b"m2") + pub(topic, b"m3"))
    assert [error_of(c.answer()) for _ in range(2)] == [(200, b"OK")] * 2
    assert nsqd.post(f"/topic/unpause?topic={topic}").status == 200
    sub = connect(nsqd)
    sub.sub(topic, "ch")
    sub.expect_ok()
    sub.rdy(10)
    for i in range(4, 8):
        c.send(pub(topic, b"m%d" % i))
        assert error_of(c.answer()) == (200, b"OK")
    assert [m.body for m in sub.read_messages(7)] == [b"m%d" % i for i in range(1, 8)]
