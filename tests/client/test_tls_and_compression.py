"""The in-band upgrades IDENTIFY negotiates, against real nsqds: TLS (server verification,
client certificates, skipping verification), deflate and snappy, and both on top of TLS."""
from __future__ import annotations

import asyncio
import ssl
from pathlib import Path
from typing import Any

import pytest

from nsq_client import Config, Consumer, IdentifyError, Message, NsqdAdmin, Producer
from tests.broker.certs import Pki, make_nonconforming_server, make_pki
from tests.broker.tls_nsqd import TlsNsqd
from tests.client.conftest import nsqd_starter
from tests.client.helpers import channel_stats, eventually
from tests.client.test_producer import check_commands_behind_a_fatal_error
from tests.conftest import Servers
from tests.reference import GoNsqdBinary
from tests.servers import HOST, Nsqd, free_port


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


def tls_flags(pki: Pki, **extra: Any) -> dict[str, Any]:
    # an explicit HTTPS address: nsqd would otherwise listen on 0.0.0.0:4152
    return {"tls_cert": str(pki.server.cert), "tls_key": str(pki.server.key),
            "https_address": f"{HOST}:{free_port()}", **extra}


@pytest.fixture(scope="module")
def tls_nsqd(module_flavour: str, module_servers: Servers, pki: Pki) -> Nsqd:
    return nsqd_starter(module_servers, module_flavour)(**tls_flags(pki))


async def round_trip(nsqd: Nsqd, topic: str, config: Config, body: bytes = b"hello",
                     admin: NsqdAdmin | None = None) -> dict[str, Any]:
    """Publish and consume one message with ``config``; nsqd's view of the consumer."""
    got: list[bytes] = []

    async def handler(message: Message) -> None:
        got.append(message.body)

    async with Producer(nsqd.tcp_address, config) as producer:
        await producer.publish(topic, body)
        await producer.multi_publish(topic, [body, b"second"])
    consumer = Consumer(topic, "ch", config.model_copy(update={"max_in_flight": 10}), handler=handler)
    await consumer.connect_to_nsqd(nsqd.tcp_address)
    try:
        await eventually(lambda: len(got) == 3)
        stats = await channel_stats(nsqd, topic, "ch", admin)
    finally:
        await consumer.stop()
    assert sorted(got) == sorted([body, body, b"second"])
    assert stats is not None
    return stats["clients"][0]


async def test_tls_verified_against_the_ca(tls_nsqd: Nsqd, pki: Pki, topic: str) -> None:
    client = await round_trip(tls_nsqd, topic, Config(tls_v1=True, tls_root_ca_file=str(pki.ca)))
    assert client["tls"] is True and client["snappy"] is False and client["deflate"] is False


async def test_tls_refuses_a_server_the_ca_did_not_sign(tls_nsqd: Nsqd, tmp_path: Path, topic: str) -> None:
    stranger_ca = make_pki(tmp_path / "other").ca
    producer = Producer(tls_nsqd.tcp_address, Config(tls_v1=True, tls_root_ca_file=str(stranger_ca)))
    with pytest.raises(ssl.SSLCertVerificationError):
        await producer.publish(topic, b"x")
    await producer.stop()


async def test_tls_checks_the_name_it_connects_to(tls_nsqd: Nsqd, pki: Pki, topic: str) -> None:
    config = Config(tls_v1=True, tls_root_ca_file=str(pki.ca), tls_server_name="not-nsqd.example")
    producer = Producer(tls_nsqd.tcp_address, config)
    with pytest.raises(ssl.SSLCertVerificationError, match="not-nsqd.example|match"):
        await producer.publish(topic, b"x")
    await producer.stop()


async def test_tls_without_verification_when_asked(tls_nsqd: Nsqd, topic: str) -> None:
    client = await round_trip(tls_nsqd, topic, Config(tls_v1=True, tls_insecure_skip_verify=True))
    assert client["tls"] is True


async def test_a_prepared_ssl_context_is_used_as_is(tls_nsqd: Nsqd, pki: Pki, topic: str) -> None:
    client = await round_trip(tls_nsqd, topic, Config(tls_v1=True, tls_context=pki.client_context()))
    assert client["tls"] is True


@pytest.mark.parametrize("compression", [{"snappy": True}, {"deflate": True, "deflate_level": 9}])
async def test_compression_on_top_of_tls(tls_nsqd: Nsqd, pki: Pki, topic: str,
                                         compression: dict[str, Any]) -> None:
    config = Config(tls_v1=True, tls_root_ca_file=str(pki.ca), **compression)
    client = await round_trip(tls_nsqd, topic, config, body=b"z" * 200_000)
    assert client["tls"] is True
    assert client["snappy"] is bool(compression.get("snappy")) and client["deflate"] is bool(compression.get("deflate"))


@pytest.mark.parametrize("compression", [{"snappy": True}, {"deflate": True}, {"deflate": True, "deflate_level": 1}])
async def test_compression_without_tls(shared_nsqd: Nsqd, topic: str, compression: dict[str, Any]) -> None:
    # bigger than snappy's 64 KiB chunk, plus many small messages through one stream
    client = await round_trip(shared_nsqd, topic, Config(**compression), body=bytes(range(256)) * 1000)
    assert client["snappy"] is bool(compression.get("snappy")) and client["deflate"] is bool(compression.get("deflate"))
    async with Producer(shared_nsqd.tcp_address, Config(**compression)) as producer:
        for start in range(0, 1000, 100):
            await producer.multi_publish(topic, [b"small %d" % i for i in range(start, start + 100)])


@pytest.fixture(scope="module")
def small_tls_nsqd(module_flavour: str, module_servers: Servers, pki: Pki) -> Nsqd:
    """A TLS nsqd that refuses messages over 100 bytes."""
    return nsqd_starter(module_servers, module_flavour)(**tls_flags(pki, max_msg_size=100))


@pytest.mark.parametrize("compression", [{}, {"snappy": True}, {"deflate": True}])
async def test_answers_unread_when_a_write_fails_are_decrypted_and_count(
        module_flavour: str, small_tls_nsqd: Nsqd, pki: Pki, topic: str, compression: dict[str, Any]) -> None:
    """Issue 36 over TLS (and compression on top of it): the answers left in the socket
    when a write failed are records of the session, read and decrypted before closing.
    Our nsqd is covered by the scripted one in test_conn_write_failure.py instead."""
    if module_flavour == "ours":
        pytest.skip("after a fatal error our nsqd ends TLS with close_notify and keeps the socket open "
                    "until the client answers it (asyncio's ssl_shutdown_timeout, 30s), so no write fails")
    config = Config(tls_v1=True, tls_root_ca_file=str(pki.ca), **compression)
    await check_commands_behind_a_fatal_error(small_tls_nsqd, topic, config)


class GoTlsNsqd(GoNsqdBinary, TlsNsqd):
    pass


async def test_client_certificates_when_nsqd_requires_them(module_flavour: str, servers: Servers, pki: Pki,
                                                           topic: str) -> None:
    # a client auth policy makes TLS required, so readiness is checked over HTTPS
    kind = TlsNsqd if module_flavour == "ours" else GoTlsNsqd
    nsqd = kind(servers.root / "client-auth-nsqd", pki,
                {"tls-client-auth-policy": "require-verify", "tls-root-ca-file": str(pki.ca)})
    servers.started.append(nsqd)
    await asyncio.to_thread(nsqd.start)
    with_cert = Config(tls_v1=True, tls_root_ca_file=str(pki.ca), tls_cert=str(pki.client.cert),
                       tls_key=str(pki.client.key))
    async with NsqdAdmin(nsqd.https_url(""), ssl_context=pki.client_context(with_cert=pki.client)) as admin:
        client = await round_trip(nsqd, topic, with_cert, admin=admin)
    assert client["tls"] is True

    without = Producer(nsqd.tcp_address, Config(tls_v1=True, tls_root_ca_file=str(pki.ca)))
    with pytest.raises((ssl.SSLError, IdentifyError)):  # which one depends on the TLS version
        await without.publish(topic, b"refused")
    await without.stop()


async def test_asking_for_tls_from_an_nsqd_without_it_fails_clearly(shared_nsqd: Nsqd, topic: str) -> None:
    producer = Producer(shared_nsqd.tcp_address, Config(tls_v1=True))
    with pytest.raises(IdentifyError, match="TLS was asked for but nsqd did not enable it"):
        await producer.publish(topic, b"x")
    await producer.stop()


async def test_a_certificate_breaking_rfc_5280_is_refused_on_every_python(
        module_servers: Servers, tmp_path: Path, topic: str) -> None:
    """The client verifies in X.509 strict mode (Python 3.13's default) on 3.11 too, so the
    same certificate is never accepted on one interpreter and refused on the other; a
    ``tls_context`` of the user's own is the way to trust such a CA."""
    ca, server = make_nonconforming_server(tmp_path / "lax-pki")
    nsqd = module_servers.nsqd(tls_cert=str(server.cert), tls_key=str(server.key),
                               https_address=f"{HOST}:{free_port()}")
    producer = Producer(nsqd.tcp_address, Config(tls_v1=True, tls_root_ca_file=str(ca)))
    with pytest.raises(ssl.SSLCertVerificationError, match="Authority Key Identifier"):
        await producer.publish(topic, b"x")
    await producer.stop()

    relaxed = ssl.create_default_context(cafile=str(ca))
    relaxed.verify_flags &= ~ssl.VERIFY_X509_STRICT
    async with Producer(nsqd.tcp_address, Config(tls_v1=True, tls_context=relaxed)) as producer:
        await producer.publish(topic, b"accepted with the user's own context")
