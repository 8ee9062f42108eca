"""The rest of nsqd's HTTP API: /ping, /info, /topic/* and /channel/* beyond the
acceptance suite, /config/:opt GET and PUT, and what the HTTP port does with bytes that
are not HTTP."""
from __future__ import annotations

import json
import re
import socket
from typing import Callable

import pytest

from tests.broker.conftest import Connect
from tests.broker.wire import WireConn
from tests.conftest import Servers
from tests.servers import Nsqd, http, wait_for

Consumer = Callable[..., WireConn]


def _post(server: Nsqd, path: str) -> tuple[int, bytes]:
    return http("POST", server.url(path))


def _message(status_body: tuple[int, bytes]) -> tuple[int, str]:
    return status_body[0], json.loads(status_body[1])["message"]


def test_ping(nsqd: Nsqd) -> None:
    assert http("GET", nsqd.url("/ping")) == (200, b"OK")


def test_info(nsqd: Nsqd) -> None:
    status, body = http("GET", nsqd.url("/info"))
    assert status == 200
    info = json.loads(body)
    assert info["version"] == "1.3.0"
    assert info["tcp_port"] == nsqd.tcp_port and info["http_port"] == nsqd.http_port
    assert info["broadcast_address"] == "127.0.0.1"
    assert isinstance(info["start_time"], int) and isinstance(info["hostname"], str)


def test_topic_create_is_idempotent_and_answers_an_empty_body(nsqd: Nsqd, topic: str) -> None:
    assert _post(nsqd, f"/topic/create?topic={topic}") == (200, b"")
    assert _post(nsqd, f"/topic/create?topic={topic}") == (200, b"")
    assert [t["topic_name"] for t in nsqd.stats(topic)["topics"]] == [topic]


def test_channel_create_then_publish_reaches_it(nsqd: Nsqd, consumer: Consumer, topic: str) -> None:
    _post(nsqd, f"/topic/create?topic={topic}")
    assert _post(nsqd, f"/channel/create?topic={topic}&channel=early") == (200, b"")
    assert http("POST", nsqd.url(f"/pub?topic={topic}"), b"kept for early") == (200, b"OK")
    assert nsqd.channel(topic, "early")["depth"] == 1  # type: ignore[index]
    sub = consumer(nsqd, topic, "early", rdy=1)
    assert sub.read_message().body == b"kept for early"


def test_topic_delete_disconnects_its_consumers(nsqd: Nsqd, consumer: Consumer, topic: str) -> None:
    sub = consumer(nsqd, topic, "ch", rdy=1)
    assert _post(nsqd, f"/topic/delete?topic={topic}") == (200, b"")
    assert sub.closed_within(5)
    assert nsqd.topic(topic) is None
    assert _message(_post(nsqd, f"/topic/delete?topic={topic}")) == (404, "TOPIC_NOT_FOUND")


def test_topic_empty_keeps_channels_and_their_messages(nsqd: Nsqd, topic: str) -> None:
    _post(nsqd, f"/topic/create?topic={topic}")
    _post(nsqd, f"/channel/create?topic={topic}&channel=ch")
    _post(nsqd, f"/topic/pause?topic={topic}")
    http("POST", nsqd.url(f"/mpub?topic={topic}"), b"a\nb")
    assert nsqd.topic(topic)["depth"] == 2  # type: ignore[index]
    assert _post(nsqd, f"/topic/empty?topic={topic}") == (200, b"")
    assert nsqd.topic(topic)["depth"] == 0  # type: ignore[index]
    assert nsqd.channel(topic, "ch") is not None


def test_channel_pause_holds_messages_until_unpause(nsqd: Nsqd, consumer: Consumer, topic: str) -> None:
    sub = consumer(nsqd, topic, "ch", rdy=5)
    assert _post(nsqd, f"/channel/pause?topic={topic}&channel=ch") == (200, b"")
    assert nsqd.channel(topic, "ch")["paused"] is True  # type: ignore[index]
    http("POST", nsqd.url(f"/pub?topic={topic}"), b"held")
    sub.expect_silence(0.3)
    assert _post(nsqd, f"/channel/unpause?topic={topic}&channel=ch") == (200, b"")
    assert sub.read_message().body == b"held"


def test_channel_delete_leaves_the_topic_and_its_other_channels(nsqd: Nsqd, consumer: Consumer,
                                                                topic: str) -> None:
    consumer(nsqd, topic, "stays")
    gone = consumer(nsqd, topic, "goes")
    assert _post(nsqd, f"/channel/delete?topic={topic}&channel=goes") == (200, b"")
    assert gone.closed_within(5)
    t = nsqd.topic(topic)
    assert t is not None and [c["channel_name"] for c in t["channels"]] == ["stays"]


def test_non_http_bytes_get_http_400(nsqd: Nsqd) -> None:
    for garbage in (b"  V2PUB x\n\x00\x00\x00\x01a", b"\x00\x01\x02\xff\xfe\r\n\r\n"):
        with socket.create_connection((nsqd.host, nsqd.http_port), timeout=5) as sock:
            sock.sendall(garbage)
            answer = b""
            while b"\r\n" not in answer and (chunk := sock.recv(4096)):
                answer += chunk
            assert re.match(rb"HTTP/1\.[01] 400 ", answer), answer[:80]
    assert http("GET", nsqd.url("/ping")) == (200, b"OK")


def test_unknown_paths_are_404_json(nsqd: Nsqd) -> None:
    assert _message(http("GET", nsqd.url("/no/such/thing"))) == (404, "NOT_FOUND")


# -- /config ---------------------------------------------------------------------------
def _config(server: Nsqd, opt: str) -> object:
    return server.config(opt)


@pytest.mark.parametrize("opt,value", [
    ("mem_queue_size", 10000),
    ("max_rdy_count", 2500),
    ("max_msg_size", 1048576),
    ("msg_timeout", 60_000_000_000),          # durations in nanoseconds, as Go marshals them
    ("max_req_timeout", 3_600_000_000_000),
    ("deflate", True),
    ("broadcast_address", "127.0.0.1"),
    ("nsqlookupd_tcp_addresses", []),
])
def test_config_get_reports_options(nsqd: Nsqd, opt: str, value: object) -> None:
    assert _config(nsqd, opt) == value


def test_config_get_reports_flags_given(limited: Nsqd) -> None:
    assert _config(limited, "max_rdy_count") == 5
    assert _config(limited, "max_req_timeout") == 1_000_000_000


@pytest.fixture(scope="module")
def own(module_servers: Servers) -> Nsqd:
    """A server whose runtime options these tests change (and put back)."""
    return module_servers.nsqd()


def test_config_put_log_level_changes_what_is_logged(own: Nsqd, connect: Connect, topic: str) -> None:
    def new_client_lines() -> int:
        return own.log().count("TCP: new client")

    def served_client() -> None:
        conn = connect(own)
        conn.pub(topic, b"x")
        conn.expect_ok()  # nsqd has handled (and logged, or not) this connection

    served_client()
    wait_for(lambda: new_client_lines() == 1)
    status, body = http("PUT", own.url("/config/log_level"), b"error")
    assert status == 200
    assert json.loads(body) == _config(own, "log_level") == 4  # Go's number for error
    served_client()
    served_client()
    status, _ = http("PUT", own.url("/config/log_level"), b"info")
    assert status == 200
    served_client()
    wait_for(lambda: new_client_lines() == 2)
    assert new_client_lines() == 2  # the two clients served at "error" left no line


def test_config_put_lookupd_addresses_round_trips(own: Nsqd) -> None:
    value = json.dumps(["127.0.0.1:1"]).encode()
    status, body = http("PUT", own.url("/config/nsqlookupd_tcp_addresses"), value)
    assert status == 200 and json.loads(body) == ["127.0.0.1:1"]
    assert _config(own, "nsqlookupd_tcp_addresses") == ["127.0.0.1:1"]
    assert http("PUT", own.url("/config/nsqlookupd_tcp_addresses"), b"[]")[0] == 200
    assert _config(own, "nsqlookupd_tcp_addresses") == []


@pytest.mark.parametrize("opt,body,expected", [
    ("log_level", b"loud", (400, "INVALID_VALUE")),
    ("nsqlookupd_tcp_addresses", b'{"not": "a list"}', (400, "INVALID_VALUE")),
    ("nsqlookupd_tcp_addresses", b'["garbage"]', (400, "INVALID_VALUE")),  # not host:port
    ("log_level", b"", (413, "INVALID_VALUE")),
    ("mem_queue_size", b"5", (400, "INVALID_OPTION")),   # only two options can be changed
    ("no_such_option", b"1", (400, "INVALID_OPTION")),
])
def test_config_put_errors(nsqd: Nsqd, opt: str, body: bytes, expected: tuple[int, str]) -> None:
    assert _message(http("PUT", nsqd.url(f"/config/{opt}"), body)) == expected
