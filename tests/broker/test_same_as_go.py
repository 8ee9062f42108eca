"""Where our nsqd must answer byte for byte as Go's nsqd v1.3.0 (issue 24): error texts,
--max-channel-consumers, a second CLS, /info, /config, /stats (JSON nulls and the text
report), HTTP answers (compact JSON, content types, OPTIONS and 405 with Allow, bad
query strings) and --tls-min-version below TLS 1.2. Every test runs against ours and
against Go's (tests/reference.py), so a difference cannot come back unseen. What we do
differently on purpose is listed in the README's "Differences from Go nsqd".
"""
from __future__ import annotations

import hashlib
import json
import re
import socket
import ssl
import struct
import zlib
from pathlib import Path
from typing import Any, Iterator

import pytest

from nsq_protocol import Frame
from tests.broker.certs import Pki, make_pki
from tests.broker.conftest import Connect
from tests.broker.tls_nsqd import TlsNsqd
from tests.broker.tls_wire import TlsWireConn
from tests.broker.wire import Closed, WireConn
from tests.conftest import Servers
from tests.reference import FLAVOURS, GoNsqd, GoNsqdBinary, flavour_or_skip
from tests.servers import Nsqd, request, wait_for

TOPIC = b"%TOPIC%"  # replaced by the test's own topic


def pub(topic: bytes, body: bytes = b"x") -> bytes:
    return b"PUB " + topic + b"\n" + struct.pack(">I", len(body)) + body


SUB = b"SUB " + TOPIC + b" ch\n"

# (what the client sends after the magic, every frame nsqd sends until it closes)
FATAL_EXCHANGES = {
    "pub-bad-topic": ([pub(b"t!")], [b'E_BAD_TOPIC PUB topic name "t!" is not valid']),
    "pub-non-ascii-topic": ([pub("tö".encode())], ['E_BAD_TOPIC PUB topic name "tö" is not valid'.encode()]),
    "pub-topic-not-utf8": ([pub(b"t\xff")], [b'E_BAD_TOPIC PUB topic name "t\\xff" is not valid']),
    "pub-topic-quote-backslash": ([pub(b't"\\')], [b'E_BAD_TOPIC PUB topic name "t\\"\\\\" is not valid']),
    "pub-topic-control-byte": ([pub(b"t\x01")], [b'E_BAD_TOPIC PUB topic name "t\\x01" is not valid']),
    # Go's MPUB names its code twice
    "mpub-bad-topic": ([b"MPUB t!\n" + struct.pack(">II", 9, 1) + struct.pack(">I", 1) + b"x"],
                       [b'E_BAD_TOPIC E_BAD_TOPIC MPUB topic name "t!" is not valid']),
    "dpub-bad-topic": ([b"DPUB t! 10\n" + struct.pack(">I", 1) + b"x"],
                       [b'E_BAD_TOPIC DPUB topic name "t!" is not valid']),
    "dpub-unparsable-timeout": ([b"DPUB " + TOPIC + b" x1\n" + struct.pack(">I", 1) + b"x"],
                                [b"E_INVALID DPUB could not parse timeout x1"]),
    "sub-bad-topic": ([b"SUB t! ch\n"], [b'E_BAD_TOPIC SUB topic name "t!" is not valid']),
    "sub-bad-channel": ([b"SUB " + TOPIC + b" c!\n"], [b'E_BAD_CHANNEL SUB channel name "c!" is not valid']),
    "rdy-unparsable": ([SUB, b"RDY x\n"], [b"OK", b"E_INVALID RDY could not parse count x"]),
    "rdy-negative": ([SUB, b"RDY -1\n"], [b"OK", b"E_INVALID RDY could not parse count -1"]),
    "rdy-not-utf8": ([SUB, b"RDY \xff\n"], [b"OK", b"E_INVALID RDY could not parse count \xff"]),
    "req-unparsable": ([SUB, b"REQ 0123456789abcdef x\n"], [b"OK", b"E_INVALID REQ could not parse timeout x"]),
    "fin-short-id": ([SUB, b"FIN 0123\n"], [b"OK", b"E_INVALID invalid message ID"]),
    "second-cls": ([SUB, b"CLS\n", b"CLS\n"], [b"OK", b"CLOSE_WAIT", b"E_INVALID cannot CLS in current state"]),
    "cls-before-sub": ([b"CLS\n"], [b"E_INVALID cannot CLS in current state"]),
    "invalid-command": ([b"FOO\n"], [b"E_INVALID invalid command FOO"]),
}


def frames_until_closed(address: tuple[str, int], sends: list[bytes], timeout: float = 5.0) -> list[Frame]:
    """Send ``sends`` one by one (each after the answers before it), collect every frame
    until nsqd closes the connection."""
    conn = WireConn(address, timeout=timeout)
    frames: list[Frame] = []
    try:
        for data in sends:
            conn.send(data)
        while True:
            try:
                frames.append(conn.next_frame(timeout))
            except Closed:
                return frames
    finally:
        conn.sock.close()


@pytest.mark.parametrize("case", list(FATAL_EXCHANGES))
def test_error_texts_and_fatal_errors(each_nsqd: Nsqd, topic: str, case: str) -> None:
    sends, expected = FATAL_EXCHANGES[case]
    sends = [s.replace(TOPIC, topic.encode()) for s in sends]
    frames = frames_until_closed((each_nsqd.host, each_nsqd.tcp_port), sends)
    assert [f.data for f in frames] == expected
    assert [f.is_error for f in frames] == [False] * (len(expected) - 1) + [True]


def test_max_channel_consumers_is_sub_failed(each_limited: Nsqd, connect: Connect, topic: str) -> None:
    for _ in range(2):  # LIMITED_FLAGS allow 2 per channel
        conn = connect(each_limited)
        conn.sub(topic, "ch")
        conn.expect_ok()
    third = connect(each_limited)
    third.sub(topic, "ch")
    frame = third.expect_fatal("E_SUB_FAILED")
    assert frame.data == f"E_SUB_FAILED SUB failed consumers for {topic}:ch exceeds limit of 2".encode()


# -- HTTP ------------------------------------------------------------------------------
def info_bounds(server: Nsqd) -> dict[str, Any]:
    info = server.get_json("/info")
    return {k: info[k] for k in ("max_heartbeat_interval", "max_output_buffer_size",
                                 "max_output_buffer_timeout", "max_deflate_level")}


def test_info_carries_the_identify_bounds(each_nsqd: Nsqd, each_limited: Nsqd) -> None:
    assert info_bounds(each_nsqd) == {"max_heartbeat_interval": 60_000_000_000, "max_output_buffer_size": 65536,
                                      "max_output_buffer_timeout": 30_000_000_000, "max_deflate_level": 6}
    assert info_bounds(each_limited) == {"max_heartbeat_interval": 5_000_000_000, "max_output_buffer_size": 1000,
                                         "max_output_buffer_timeout": 2_000_000_000, "max_deflate_level": 4}
    info = each_nsqd.get("/info")
    assert list(info.json())[:6] == ["version", "broadcast_address", "hostname", "http_port", "tcp_port", "start_time"]


JSON = "application/json; charset=utf-8"
TEXT = "text/plain; charset=utf-8"


def error_body(code: str) -> bytes:
    return b'{"message":"' + code.encode() + b'"}'


# (method, path, body) -> (status, Content-Type, Allow, body); None: no such header
ANSWERS: list[tuple[tuple[str, str, bytes | None], tuple[int, str | None, str | None, bytes]]] = [
    (("GET", "/ping", None), (200, TEXT, None, b"OK")),
    (("OPTIONS", "/pub", None), (200, None, "OPTIONS, POST", b"")),
    (("OPTIONS", "/ping", None), (200, None, "GET, OPTIONS", b"")),
    (("OPTIONS", "/config/log_level", None), (200, None, "GET, OPTIONS, PUT", b"")),
    (("GET", "/pub", None), (405, JSON, "OPTIONS, POST", error_body("METHOD_NOT_ALLOWED"))),
    (("PUT", "/topic/pause", b""), (405, JSON, "OPTIONS, POST", error_body("METHOD_NOT_ALLOWED"))),
    (("HEAD", "/ping", None), (405, JSON, "GET, OPTIONS", b"")),  # HEAD answers carry no body
    (("POST", "/stats", b""), (405, JSON, "GET, OPTIONS", error_body("METHOD_NOT_ALLOWED"))),
    (("DELETE", "/config/log_level", None), (405, JSON, "GET, OPTIONS, PUT", error_body("METHOD_NOT_ALLOWED"))),
    (("GET", "/no/such/thing", None), (404, JSON, None, error_body("NOT_FOUND"))),
    (("OPTIONS", "/no/such/thing", None), (404, JSON, None, error_body("NOT_FOUND"))),
    (("POST", "/topic/create?topic=%TOPIC%", b""), (200, None, None, b"")),
    (("POST", "/pub?topic=%TOPIC%", b"hi"), (200, TEXT, None, b"OK")),
    (("POST", "/pub?topic=%TOPIC%", b""), (400, JSON, None, error_body("MSG_EMPTY"))),
    (("POST", "/pub?topic=%zz", b"x"), (400, JSON, None, error_body("INVALID_REQUEST"))),
    (("POST", "/topic/create?topic=%zz", b""), (400, JSON, None, error_body("INVALID_REQUEST"))),
    (("POST", "/topic/delete?topic=a;b", b""), (400, JSON, None, error_body("INVALID_REQUEST"))),
    (("GET", "/stats?format=json&x=%zz", None), (400, JSON, None, error_body("INVALID_REQUEST"))),
    (("GET", "/config/msg_timeout", None), (200, JSON, None, b"60000000000")),
    (("GET", "/config/log_level", None), (200, JSON, None, b"2")),
    (("GET", "/config/tls_required", None), (200, JSON, None, b"0")),
    (("GET", "/config/nsqlookupd_tcp_addresses", None), (200, JSON, None, b"[]")),
    (("GET", "/config/log_prefix", None), (200, TEXT, None, b"[nsqd] ")),
    (("GET", "/config/https_address", None), (200, TEXT, None, b"0.0.0.0:4152")),
    (("GET", "/config/statsd_address", None), (200, None, None, b"")),
    (("GET", "/config/node_id", None), (400, JSON, None, error_body("INVALID_OPTION"))),
    (("GET", "/config/client_timeout", None), (400, JSON, None, error_body("INVALID_OPTION"))),
    (("GET", "/config/queue_scan_interval", None), (400, JSON, None, error_body("INVALID_OPTION"))),
    (("GET", "/config/no_such_option", None), (400, JSON, None, error_body("INVALID_OPTION"))),
]


@pytest.mark.parametrize("call,expected", ANSWERS, ids=[f"{m} {p}" for (m, p, _), _ in ANSWERS])
def test_http_answers(each_nsqd: Nsqd, topic: str, call: tuple[str, str, bytes | None],
                      expected: tuple[int, str | None, str | None, bytes]) -> None:
    method, path, body = call
    answer = request(method, each_nsqd.url(path.replace("%TOPIC%", topic)), body)
    headers = {k.lower(): v for k, v in answer.headers.items()}
    assert (answer.status, headers.get("content-type"), headers.get("allow"), answer.body) == expected
    plain = (method, path) == ("GET", "/ping") or (method == "OPTIONS" and answer.status == 200)
    assert headers.get("x-nsq-content-type") == (None if plain else "nsq; version=1.0")


def test_json_is_compact(each_nsqd: Nsqd, topic: str) -> None:
    assert each_nsqd.post(f"/pub?topic={topic}", b"x").status == 200
    for path in ("/info", f"/stats?format=json&topic={topic}", "/config/e2e_processing_latency_percentiles"):
        body = each_nsqd.get(path).body
        assert body == json.dumps(json.loads(body), separators=(",", ":")).encode()


def test_config_values_are_the_resolved_ones(each_nsqd: Nsqd) -> None:
    assert each_nsqd.config("id") == zlib.crc32(hashlib.md5(socket.gethostname().encode()).digest()) % 1024
    assert each_nsqd.config("broadcast_tcp_port") == each_nsqd.tcp_port
    assert each_nsqd.config("broadcast_http_port") == each_nsqd.http_port
    assert each_nsqd.config("statsd_prefix") == f"nsq.127_0_0_1_{each_nsqd.http_port}."
    assert each_nsqd.config("tcp_address") == each_nsqd.tcp_address
    assert each_nsqd.config("data_path") == str(each_nsqd.workdir / "data")


def test_config_tls_min_version_is_gos_number(each_nsqd: Nsqd) -> None:
    # ours defaults to TLS 1.2 (README: Differences from Go nsqd), Go v1.3.0 to TLS 1.0
    expected = 0x0301 if isinstance(each_nsqd, GoNsqd) else 0x0303
    assert each_nsqd.config("tls_min_version") == expected


@pytest.fixture(scope="module", params=FLAVOURS)
def own_nsqd(request: pytest.FixtureRequest, module_servers: Servers) -> Nsqd:
    """A fresh nsqd of each flavour for what changes server-wide state (/config PUT) or
    needs a server no other test has published to (producers in /stats)."""
    return module_servers.nsqd(kind=GoNsqd if flavour_or_skip(request.param) == "go" else Nsqd)


@pytest.mark.parametrize("opt,body,expected", [
    ("log_level", b" info", (400, error_body("INVALID_VALUE"))),
    ("log_level", b"info\n", (400, error_body("INVALID_VALUE"))),
    ("log_level", b"loud", (400, error_body("INVALID_VALUE"))),
    ("log_level", b"", (413, error_body("INVALID_VALUE"))),
    ("log_level", b"WARN", (200, b"3")),
    ("log_level", b"info", (200, b"2")),
    ("nsqlookupd_tcp_addresses", b"[1]", (400, error_body("INVALID_VALUE"))),
    ("nsqlookupd_tcp_addresses", b'"127.0.0.1:1"', (400, error_body("INVALID_VALUE"))),
    ("nsqlookupd_tcp_addresses", b"[]", (200, b"[]")),
    ("mem_queue_size", b"5", (400, error_body("INVALID_OPTION"))),
    ("no_such_option", b"", (413, error_body("INVALID_VALUE"))),  # Go reads the body first
])
def test_config_put_validates_as_go(own_nsqd: Nsqd, opt: str, body: bytes, expected: tuple[int, bytes]) -> None:
    answer = request("PUT", own_nsqd.url(f"/config/{opt}"), body)
    assert (answer.status, answer.body) == expected


def test_config_put_accepts_a_null_address_list(own_nsqd: Nsqd) -> None:
    answer = request("PUT", own_nsqd.url("/config/nsqlookupd_tcp_addresses"), b"null")
    assert answer.status == 200 and answer.json() in (None, [])
    assert own_nsqd.config("nsqlookupd_tcp_addresses") in (None, [])
    assert request("PUT", own_nsqd.url("/config/nsqlookupd_tcp_addresses"), b"[]").status == 200


# -- /stats ----------------------------------------------------------------------------
def stats(server: Nsqd, query: str) -> Any:
    return server.get_json("/stats?format=json&include_mem=false" + query)


def test_stats_json_has_gos_nulls(own_nsqd: Nsqd, connect: Connect, topic: str) -> None:
    consumer = connect(own_nsqd)
    consumer.sub(topic, "ch")
    consumer.expect_ok()
    before = stats(own_nsqd, "")
    assert before["producers"] is None  # nobody published to this nsqd yet
    assert stats(own_nsqd, "&topic=never-seen") == {
        "version": "1.3.0", "health": "OK", "start_time": before["start_time"], "topics": None,
        "producers": None, **({"drain": before["drain"]} if "drain" in before else {})}
    (client,) = stats(own_nsqd, f"&topic={topic}")["topics"][0]["channels"][0]["clients"]
    assert "pub_counts" not in client and "authed" not in client and "auth_identity" not in client
    without_clients = stats(own_nsqd, f"&topic={topic}&include_clients=false")
    assert without_clients["topics"][0]["channels"][0]["clients"] is None
    assert stats(own_nsqd, f"&topic={topic}&channel=never-seen")["topics"] == []


def test_stats_text_report(own_nsqd: Nsqd, connect: Connect, topic: str) -> None:
    producer = connect(own_nsqd)
    producer.pub(topic, b"one")
    producer.expect_ok()
    consumer = connect(own_nsqd)
    consumer.identify({"hostname": "host-a", "user_agent": "tests/1"})
    consumer.read_frame()
    consumer.sub(topic, "ch")
    consumer.expect_ok()
    wait_for(lambda: (own_nsqd.channel(topic, "ch") or {}).get("depth") == 1, message="the message reaches ch")
    assert own_nsqd.post(f"/channel/create?topic={topic}&channel=paused").status == 200
    assert own_nsqd.post(f"/channel/pause?topic={topic}&channel=paused").status == 200

    text = own_nsqd.get(f"/stats?include_mem=false&topic={topic}").body.decode()
    text = re.sub(r"connected: \d+s", "connected: Ns", text)
    head, report = text.split("\nHealth: OK\n", 1)
    assert re.fullmatch(r"nsqd v1\.3\.0 \(built w/\S+\)\nstart_time \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(Z|[+-]\d\d:\d\d)\n"
                        r"uptime [0-9.]+(ns|µs|ms|s|m\d+(\.\d+)?s|h\d+m\d+(\.\d+)?s)\n", head), head
    consumer_port = consumer.sock.getsockname()[1]
    producer_port = producer.sock.getsockname()[1]
    consumer_id, producer_id = f"host-a:{consumer_port} tests/1", f"127.0.0.1:{producer_port} "
    expected = (
        f"\nTopics:\n"
        f"   [{topic:<15}] depth: 0     be-depth: 0     msgs: 1        e2e%: \n"
        f"      [{'ch':<25}] depth: 1     be-depth: 0     inflt: 0    def: 0    re-q: 0     timeout: 0     "
        f"msgs: 1        e2e%: \n"
        f"        [V2 {consumer_id:<21}] state: 3 inflt: 0    rdy: 0    fin: 0        re-q: 0        "
        f"msgs: 0        connected: Ns\n"
        f"   *P [{'paused':<25}] depth: 0     be-depth: 0     inflt: 0    def: 0    re-q: 0     timeout: 0     "
        f"msgs: 0        e2e%: \n"
        f"\nProducers:\n"
        f"   [V2 {producer_id:<21}] msgs: 1        topics: {topic}=1 connected: Ns\n")
    assert report == expected
    none = own_nsqd.get("/stats?include_mem=false&topic=never-seen").body.decode()
    assert none.endswith("\nHealth: OK\n\nTopics: None\n\nProducers: None\n")


# -- TLS below 1.2 ---------------------------------------------------------------------
@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


class GoTlsNsqd(GoNsqdBinary, TlsNsqd):
    pass


@pytest.fixture(scope="module", params=FLAVOURS)
def tls10_nsqd(request: pytest.FixtureRequest, module_servers: Servers, pki: Pki) -> Iterator[TlsNsqd]:
    kind = GoTlsNsqd if flavour_or_skip(request.param) == "go" else TlsNsqd
    server = kind(module_servers.root / f"tls10-{request.param}", pki, {"tls-min-version": "tls1.0"})
    module_servers.started.append(server)
    yield server.start()


@pytest.mark.parametrize("version", ["TLSv1", "TLSv1_1"])
def test_tls_min_version_tls1_0_admits_old_clients(tls10_nsqd: TlsNsqd, pki: Pki, topic: str, version: str) -> None:
    context = pki.client_context()
    with pytest.warns(DeprecationWarning):  # Python deprecates them; the option is about them
        context.minimum_version = context.maximum_version = getattr(ssl.TLSVersion, version)
    context.set_ciphers("DEFAULT:@SECLEVEL=0")  # OpenSSL 3 refuses SHA-1 handshakes otherwise
    conn = TlsWireConn((tls10_nsqd.host, tls10_nsqd.tcp_port))
    try:
        conn.negotiate_tls(context)
        assert conn.tls_version == version.replace("_", ".")
        conn.pub(topic, b"over an old TLS")
        conn.expect_ok()
    finally:
        conn.sock.close()


def test_tls_min_version_that_openssl_cannot_offer_refuses_to_start(tmp_path: Path, pki: Pki,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Where this Python's OpenSSL has no TLS 1.0, nsqd says so and does not start."""
    import nsqd.tls as tls
    from nsqd.options import NsqdOptions
    monkeypatch.setitem(tls._BUILT_WITH, ssl.TLSVersion.TLSv1, False)
    options = NsqdOptions(tls_cert=str(pki.server.cert), tls_key=str(pki.server.key), tls_min_version="tls1.0")
    with pytest.raises(tls.TlsSetupError, match="tls-min-version=tls1.0.*built without"):
        tls.server_context(options)
