"""Where our nsqlookupd must answer as Go's v1.3.0 (issues 22 and 24): what is left of an
``#ephemeral`` name when its producers leave, V1 error texts, and the HTTP layer
(content types, OPTIONS and 405 with Allow, bad query strings). Each test runs against
ours and Go's (tests/reference.py)."""
from __future__ import annotations

from typing import Any
from urllib.parse import quote

import pytest

from tests.conftest import Servers
from tests.lookupd.v1_peer import V1Peer
from tests.reference import FLAVOURS, NSQLOOKUPD_REF, GoNsqlookupd, skip_unless_present
from tests.servers import Nsqlookupd, request, wait_for


@pytest.fixture(scope="module", params=FLAVOURS)
def each_lookupd(request: pytest.FixtureRequest, module_servers: Servers) -> Nsqlookupd:
    if request.param == "go":
        skip_unless_present(NSQLOOKUPD_REF, "NSQLOOKUPD_REF")
        return module_servers.lookupd(kind=GoNsqlookupd)
    return module_servers.lookupd()


_ports = iter(range(31000, 32000))


def peer(lookupd: Nsqlookupd) -> V1Peer:
    """An identified V1 peer (a fake nsqd with a port of its own)."""
    connection = V1Peer.to(lookupd)
    connection.identify({"broadcast_address": "127.0.0.1", "hostname": "fake", "tcp_port": next(_ports),
                         "http_port": 1, "version": "1.3.0"})
    return connection


def get(lookupd: Nsqlookupd, path: str) -> tuple[int, Any]:
    answer = lookupd.get(path)
    return answer.status, answer.json()


def test_a_disconnect_leaves_ephemeral_names_known_with_no_producers(each_lookupd: Nsqlookupd, topic: str) -> None:
    ephemeral = f"{topic}#ephemeral"
    gone = peer(each_lookupd)
    assert gone.command(f"REGISTER {ephemeral}\n".encode()) == b"OK"
    assert gone.command(f"REGISTER {topic} ch#ephemeral\n".encode()) == b"OK"
    gone.close()
    wait_for(lambda: get(each_lookupd, f"/lookup?topic={topic}")[1]["producers"] == [],
             message="the closed peer's registrations are dropped")
    assert get(each_lookupd, f"/lookup?topic={quote(ephemeral)}") == (200, {"channels": [], "producers": []})
    assert get(each_lookupd, f"/channels?topic={topic}") == (200, {"channels": ["ch#ephemeral"]})


def test_unregistering_a_topic_keeps_its_ephemeral_channels(each_lookupd: Nsqlookupd, topic: str) -> None:
    with peer(each_lookupd) as p:
        p.command(f"REGISTER {topic} ch#ephemeral\n".encode())
        assert p.command(f"UNREGISTER {topic}\n".encode()) == b"OK"
        assert get(each_lookupd, f"/lookup?topic={topic}") == (200, {"channels": ["ch#ephemeral"], "producers": []})


def test_unregistering_the_ephemeral_name_itself_forgets_it(each_lookupd: Nsqlookupd, topic: str) -> None:
    ephemeral = f"{topic}#ephemeral"
    with peer(each_lookupd) as p:
        p.command(f"REGISTER {ephemeral}\n".encode())
        p.command(f"REGISTER {topic} ch#ephemeral\n".encode())
        assert p.command(f"UNREGISTER {ephemeral}\n".encode()) == b"OK"
        assert p.command(f"UNREGISTER {topic} ch#ephemeral\n".encode()) == b"OK"
        assert get(each_lookupd, f"/lookup?topic={quote(ephemeral)}") == (404, {"message": "TOPIC_NOT_FOUND"})
        assert get(each_lookupd, f"/channels?topic={topic}") == (200, {"channels": []})


@pytest.mark.parametrize("command,expected", [
    (b"REGISTER t!\n", b"E_BAD_TOPIC REGISTER topic name 't!' is not valid"),
    (b"REGISTER t c!\n", b"E_BAD_CHANNEL REGISTER channel name 'c!' is not valid"),
    (b"REGISTER t\xff\n", b"E_BAD_TOPIC REGISTER topic name 't\xff' is not valid"),
    (b"UNREGISTER t!\n", b"E_BAD_TOPIC UNREGISTER topic name 't!' is not valid"),
    (b"FOO\n", b"E_INVALID invalid command FOO"),
])
def test_v1_error_texts(each_lookupd: Nsqlookupd, command: bytes, expected: bytes) -> None:
    with peer(each_lookupd) as p:
        assert p.command(command) == expected


JSON = "application/json; charset=utf-8"
TEXT = "text/plain; charset=utf-8"


def error_body(code: str) -> bytes:
    return b'{"message":"' + code.encode() + b'"}'


# (method, path) -> (status, Content-Type, Allow, X-NSQ-Content-Type, body)
NSQ = "nsq; version=1.0"
ANSWERS = [
    (("GET", "/ping"), (200, TEXT, None, None, b"OK")),
    (("OPTIONS", "/lookup"), (200, None, "GET, OPTIONS", None, b"")),
    (("OPTIONS", "/topic/create"), (200, None, "OPTIONS, POST", None, b"")),
    (("POST", "/lookup"), (405, JSON, "GET, OPTIONS", NSQ, error_body("METHOD_NOT_ALLOWED"))),
    (("HEAD", "/ping"), (405, JSON, "GET, OPTIONS", NSQ, b"")),
    (("GET", "/topic/delete"), (405, JSON, "OPTIONS, POST", NSQ, error_body("METHOD_NOT_ALLOWED"))),
    (("GET", "/no/such/thing"), (404, JSON, None, NSQ, error_body("NOT_FOUND"))),
    (("GET", "/lookup"), (400, JSON, None, NSQ, error_body("MISSING_ARG_TOPIC"))),
    (("GET", "/lookup?topic=%zz"), (400, JSON, None, NSQ, error_body("INVALID_REQUEST"))),
    (("GET", "/channels?topic=a;b"), (400, JSON, None, NSQ, error_body("INVALID_REQUEST"))),
    (("POST", "/topic/create?topic=made-by-http"), (200, None, None, NSQ, b"")),
    (("GET", "/channels?topic=never-seen"), (200, JSON, None, NSQ, b'{"channels":[]}')),
]


@pytest.mark.parametrize("call,expected", ANSWERS, ids=[" ".join(c) for c, _ in ANSWERS])
def test_http_answers(each_lookupd: Nsqlookupd, call: tuple[str, str],
                      expected: tuple[int, str | None, str | None, str | None, bytes]) -> None:
    method, path = call
    answer = request(method, each_lookupd.url(path))
    headers = {k.lower(): v for k, v in answer.headers.items()}
    assert (answer.status, headers.get("content-type"), headers.get("allow"),
            headers.get("x-nsq-content-type"), answer.body) == expected
