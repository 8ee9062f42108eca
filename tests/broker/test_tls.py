"""TLS on nsqd: the in-band upgrade after IDENTIFY (alone and under snappy/deflate),
client certificates, --tls-required on TCP and HTTP, and the HTTPS listener.
Certificates are made for each test module by tests/broker/certs.py."""
from __future__ import annotations

import datetime
import json
import ssl
import subprocess
import uuid
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tests.broker.certs import CertFiles, Pki, make_pki
from tests.broker.tls_nsqd import TlsNsqd
from tests.broker.tls_wire import TlsWireConn
from tests.broker.wire import Closed
from tests.servers import BIN, http, wait_for

StartNsqd = Callable[..., TlsNsqd]


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def module_start(tmp_path_factory: pytest.TempPathFactory, pki: Pki) -> Iterator[StartNsqd]:
    started: list[TlsNsqd] = []

    def start(**flags: Any) -> TlsNsqd:
        server = TlsNsqd(tmp_path_factory.mktemp("nsqd"), pki, {k.replace("_", "-"): v for k, v in flags.items()})
        started.append(server)
        return server.start()

    yield start
    for server in started:
        server.stop()


@pytest.fixture(scope="module")
def tls_nsqd(module_start: StartNsqd) -> TlsNsqd:
    """TLS offered, nothing required."""
    return module_start()


@pytest.fixture(scope="module")
def verify_nsqd(module_start: StartNsqd, pki: Pki) -> TlsNsqd:
    """Client certificates signed by the test CA required (which implies TLS required)."""
    return module_start(tls_client_auth_policy="require-verify", tls_root_ca_file=str(pki.ca))


@pytest.fixture(scope="module")
def any_cert_nsqd(module_start: StartNsqd, pki: Pki) -> TlsNsqd:
    """``require``: a client certificate is demanded, any will do (the root CA is given
    too, as operators do, and must not narrow what is accepted)."""
    return module_start(tls_client_auth_policy="require", tls_root_ca_file=str(pki.ca))


@pytest.fixture(scope="module")
def self_signed(tmp_path_factory: pytest.TempPathFactory) -> CertFiles:
    """A client certificate that signs itself: no CA vouches for it."""
    directory = tmp_path_factory.mktemp("self-signed")
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "selfie")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .sign(key, hashes.SHA256()))
    files = CertFiles(directory / "selfie.pem", directory / "selfie.key")
    files.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    files.key.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                            serialization.NoEncryption()))
    return files


def channel_clients(server: TlsNsqd, topic: str) -> list[dict[str, Any]]:
    status, body = server.https("GET", f"/stats?format=json&topic={topic}")
    assert status == 200
    return [c for t in json.loads(body)["topics"] for ch in t["channels"] for c in ch["clients"]]


@pytest.fixture
def conns() -> Iterator[Callable[[TlsNsqd], TlsWireConn]]:
    opened: list[TlsWireConn] = []

    def open_conn(server: TlsNsqd) -> TlsWireConn:
        conn = TlsWireConn(server.tcp_address)
        opened.append(conn)
        return conn

    yield open_conn
    for conn in opened:
        conn.close()


def topic_name() -> str:
    return f"tls-{uuid.uuid4().hex[:10]}"


def round_trip(producer: TlsWireConn, consumer: TlsWireConn, body: bytes) -> None:
    """SUB on ``consumer``, PUB on ``producer``, the same body arrives and is FINished."""
    topic = topic_name()
    consumer.sub(topic, "ch")
    consumer.expect_ok()
    consumer.rdy(1)
    producer.pub(topic, body)
    producer.expect_ok()
    msg = consumer.read_message()
    assert msg.body == body
    consumer.fin(msg.id)


# -- the in-band upgrade --------------------------------------------------------------
def test_tls_upgrade_confirms_with_ok_over_tls_and_carries_messages(tls_nsqd: TlsNsqd, pki: Pki, conns) -> None:
    producer, consumer = conns(tls_nsqd), conns(tls_nsqd)
    for conn in (producer, consumer):
        answer = conn.negotiate_tls(pki.client_context())
        assert answer["tls_v1"] is True
        assert conn.tls_version in ("TLSv1.2", "TLSv1.3")
    round_trip(producer, consumer, b"over tls")

    clients = [c for t in tls_nsqd.stats()["topics"] for ch in t["channels"] for c in ch["clients"]]
    assert clients and all(c["tls"] is True and c["tls_version"].startswith("TLS") for c in clients)
    assert all(c["tls_negotiated_protocol_is_mutual"] is True for c in clients)


@pytest.mark.parametrize("compression", ["snappy", "deflate"])
def test_compression_is_stacked_on_tls(tls_nsqd: TlsNsqd, pki: Pki, conns, compression: str) -> None:
    producer, consumer = conns(tls_nsqd), conns(tls_nsqd)
    for conn in (producer, consumer):
        answer = conn.negotiate_tls(pki.client_context(), {compression: True})
        assert answer["tls_v1"] is True and answer[compression] is True
    body = b"a very compressible line of text\n" * 2000
    round_trip(producer, consumer, body)
    # the consumer got the body through TLS records holding compressed bytes
    assert consumer.wire_bytes_received < consumer.plain_bytes_received / 5


def test_without_a_certificate_tls_is_not_offered(servers: Any, connect: Any) -> None:
    plain = servers.nsqd()
    conn = connect(plain)
    answer = conn.negotiate({"tls_v1": True})
    assert answer["tls_v1"] is False
    conn.pub(topic_name(), b"still plain")
    conn.expect_ok()


def test_tls_offered_but_not_asked_for_stays_plain(tls_nsqd: TlsNsqd, conns) -> None:
    conn = conns(tls_nsqd)
    answer = conn.negotiate({})
    assert answer["tls_v1"] is False
    topic = topic_name()
    conn.pub(topic, b"plain")
    conn.expect_ok()
    conn.sub(topic, "ch")
    conn.expect_ok()
    [client] = channel_clients(tls_nsqd, topic)
    assert client["tls"] is False and client["tls_negotiated_protocol_is_mutual"] is False


def test_server_certificate_verifies_against_the_ca(tls_nsqd: TlsNsqd, pki: Pki, conns, tmp_path: Path) -> None:
    """A client that trusts another CA refuses our server: the certificate is really used."""
    other = make_pki(tmp_path / "other")
    conn = conns(tls_nsqd)
    with pytest.raises(ssl.SSLCertVerificationError):
        conn.negotiate_tls(other.client_context())


def test_a_failed_handshake_closes_only_that_connection(tls_nsqd: TlsNsqd, pki: Pki, conns) -> None:
    bad = conns(tls_nsqd)
    bad.identify({"feature_negotiation": True, "tls_v1": True})
    assert bad.read_json()["tls_v1"] is True
    bad.send_raw(b"this is not a TLS client hello\r\n\r\n")
    assert bad.closed_within(10)

    good = conns(tls_nsqd)
    good.negotiate_tls(pki.client_context())
    good.pub(topic_name(), b"fine")
    good.expect_ok()
    wait_for(lambda: "\nnsq_clients 1.0\n" in http("GET", tls_nsqd.url("/metrics"))[1].decode(), 5,
             message="only the good client left")
    assert "IDENTIFY failed" in tls_nsqd.log() and "Traceback" not in tls_nsqd.log()


def test_min_version_refuses_older_clients(module_start: StartNsqd, pki: Pki, conns) -> None:
    server = module_start(tls_min_version="tls1.3")
    old = pki.client_context()
    old.maximum_version = ssl.TLSVersion.TLSv1_2
    with pytest.raises((ssl.SSLError, Closed, ConnectionError)):
        conns(server).negotiate_tls(old)
    new = conns(server)
    new.negotiate_tls(pki.client_context())
    assert new.tls_version == "TLSv1.3"


# -- client certificates ----------------------------------------------------------------
def test_client_certificate_signed_by_the_root_ca_is_accepted(verify_nsqd: TlsNsqd, pki: Pki, conns) -> None:
    producer, consumer = conns(verify_nsqd), conns(verify_nsqd)
    for conn in (producer, consumer):
        conn.negotiate_tls(pki.client_context(with_cert=pki.client))
    round_trip(producer, consumer, b"mutual tls")


def test_missing_client_certificate_is_refused(verify_nsqd: TlsNsqd, pki: Pki, conns) -> None:
    with pytest.raises((ssl.SSLError, Closed, ConnectionError)):
        conns(verify_nsqd).negotiate_tls(pki.client_context())


@pytest.mark.parametrize("who", ["stranger", "self_signed"])
def test_client_certificate_from_an_unknown_ca_is_refused(verify_nsqd: TlsNsqd, pki: Pki, conns,
                                                          self_signed: CertFiles, who: str) -> None:
    cert = pki.stranger if who == "stranger" else self_signed
    with pytest.raises((ssl.SSLError, Closed, ConnectionError)):
        conns(verify_nsqd).negotiate_tls(pki.client_context(with_cert=cert))


@pytest.mark.parametrize("who", ["self_signed", "stranger", "client"])
def test_require_accepts_any_client_certificate(any_cert_nsqd: TlsNsqd, pki: Pki, conns,
                                                self_signed: CertFiles, who: str) -> None:
    """Go's RequireAnyClientCert: the certificate is demanded, not verified."""
    cert = {"self_signed": self_signed, "stranger": pki.stranger, "client": pki.client}[who]
    producer, consumer = conns(any_cert_nsqd), conns(any_cert_nsqd)
    for conn in (producer, consumer):
        conn.negotiate_tls(pki.client_context(with_cert=cert))
    topic = topic_name()
    consumer.sub(topic, "ch")
    consumer.expect_ok()
    consumer.rdy(1)
    producer.pub(topic, b"any certificate")
    producer.expect_ok()
    msg = consumer.read_message()
    assert msg.body == b"any certificate"
    consumer.fin(msg.id)
    [client] = channel_clients(any_cert_nsqd, topic)
    assert client["tls"] is True


def test_require_refuses_a_client_without_a_certificate(any_cert_nsqd: TlsNsqd, pki: Pki, conns) -> None:
    conn = conns(any_cert_nsqd)
    with pytest.raises((ssl.SSLError, Closed, ConnectionError)):
        conn.negotiate_tls(pki.client_context())
        conn.pub(topic_name(), b"no certificate")  # TLS 1.3 lets the client finish first
        conn.expect_ok()
    assert conn.closed_within(10)


def test_client_auth_policy_makes_tls_required(verify_nsqd: TlsNsqd, conns) -> None:
    conn = conns(verify_nsqd)
    conn.pub(topic_name(), b"plain")
    frame = conn.expect_fatal("E_INVALID")
    assert frame.data == b"E_INVALID cannot PUB in current state (TLS required)"
    status, body = http("GET", verify_nsqd.url("/ping"))
    assert status == 403 and json.loads(body)["message"] == "TLS_REQUIRED"


# -- --tls-required ---------------------------------------------------------------------
def test_tls_required_tcp_https_refuses_plaintext_commands_but_not_http(module_start: StartNsqd, conns) -> None:
    server = module_start(tls_required="tcp-https")
    first = conns(server)
    first.pub(topic_name(), b"x")
    assert first.expect_fatal("E_INVALID").data == b"E_INVALID cannot PUB in current state (TLS required)"

    # IDENTIFY itself is allowed without TLS (as in nsqd); the next command is not
    second = conns(server)
    assert second.negotiate({})["tls_v1"] is False
    second.sub(topic_name(), "ch")
    assert second.expect_fatal("E_INVALID").data == b"E_INVALID cannot SUB in current state (TLS required)"

    status, body = http("POST", server.url(f"/pub?topic={topic_name()}"), b"over plain http")
    assert (status, body) == (200, b"OK")


def test_tls_required_accepts_upgraded_clients(module_start: StartNsqd, pki: Pki, conns) -> None:
    server = module_start(tls_required="true")
    producer, consumer = conns(server), conns(server)
    for conn in (producer, consumer):
        conn.negotiate_tls(pki.client_context())
    round_trip(producer, consumer, b"required and given")


def test_tls_required_true_turns_plain_http_away(module_start: StartNsqd) -> None:
    server = module_start(tls_required="true")
    for method, path in (("GET", "/ping"), ("GET", "/stats"), ("POST", f"/pub?topic={topic_name()}")):
        status, body = http(method, server.url(path), b"x" if method == "POST" else None)
        assert status == 403
        assert json.loads(body) == {"message": "TLS_REQUIRED", "https_port": server.https_port}
    assert server.https("GET", "/ping") == (200, b"OK")


def test_tls_required_without_a_certificate_does_not_start(tmp_path: Path) -> None:
    result = subprocess.run([str(BIN / "nsqd"), "--tls-required=true", "--tcp-address=127.0.0.1:0",
                             "--http-address=127.0.0.1:0", f"--data-path={tmp_path}"],
                            capture_output=True, text=True, timeout=30)
    assert result.returncode != 0
    assert "cannot require TLS client connections without TLS key and cert" in result.stderr


# -- HTTPS ----------------------------------------------------------------------------
def test_https_listener_serves_the_same_api(tls_nsqd: TlsNsqd) -> None:
    topic = topic_name()
    assert tls_nsqd.https("POST", f"/pub?topic={topic}", b"via https") == (200, b"OK")
    assert tls_nsqd.https("POST", f"/mpub?topic={topic}", b"one\ntwo") == (200, b"OK")
    status, body = tls_nsqd.https("GET", f"/stats?format=json&topic={topic}")
    assert status == 200
    assert json.loads(body)["topics"][0]["message_count"] == 3
    status, body = tls_nsqd.https("GET", "/info")
    assert status == 200 and json.loads(body)["tcp_port"] == tls_nsqd.tcp_port
    # and plain HTTP sees the same nsqd
    wait_for(lambda: tls_nsqd.topic(topic)["message_count"] == 3, 5)

