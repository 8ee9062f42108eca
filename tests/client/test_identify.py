"""What IDENTIFY negotiates and what nsqd then knows of the client, and AUTH against nsqd
configured with an auth server."""
from __future__ import annotations

from typing import Iterator

import pytest

from nsq_client import Config, Connection, Consumer, IdentifyError, Message, Producer, ServerError
from tests.broker.auth_server import AuthServer, Grant, Identity
from tests.client.conftest import nsqd_starter
from tests.client.helpers import channel_stats, eventually
from tests.conftest import Servers
from tests.servers import Nsqd


async def test_negotiated_settings_come_back_from_nsqd(shared_nsqd: Nsqd) -> None:
    config = Config(output_buffer_size=4096, output_buffer_timeout=0.1, msg_timeout=5, sample_rate=10,
                    deflate=True, deflate_level=3)
    conn = Connection(shared_nsqd.tcp_address, config)
    await conn.connect()
    try:
        settings = conn.server_settings
        assert (settings["output_buffer_size"], settings["output_buffer_timeout"]) == (4096, 100)
        assert (settings["msg_timeout"], settings["sample_rate"]) == (5000, 10)
        assert (settings["deflate"], settings["deflate_level"], settings["snappy"]) == (True, 3, False)
        assert conn.max_rdy == settings["max_rdy_count"] == 2500
    finally:
        conn.close()
        await conn.wait_closed()


async def test_nsqd_sees_the_identity_the_config_gives(shared_nsqd: Nsqd, topic: str) -> None:
    async def handler(message: Message) -> None:
        pass

    config = Config(client_id="worker-7", hostname="worker-7.example", user_agent="tests/1.0", sample_rate=50)
    consumer = Consumer(topic, "ch", config, handler=handler)
    await consumer.connect_to_nsqd(shared_nsqd.tcp_address)
    try:
        stats = await eventually(lambda: channel_stats(shared_nsqd, topic, "ch"))
        client = stats["clients"][0]
    finally:
        await consumer.stop()
    assert (client["client_id"], client["hostname"], client["user_agent"]) == \
        ("worker-7", "worker-7.example", "tests/1.0")
    assert client["sample_rate"] == 50


async def test_local_addr_binds_the_outgoing_side(shared_nsqd: Nsqd, topic: str) -> None:
    async def handler(message: Message) -> None:
        pass

    consumer = Consumer(topic, "ch", Config(local_addr="127.0.0.2"), handler=handler)
    await consumer.connect_to_nsqd(shared_nsqd.tcp_address)
    try:
        stats = await eventually(lambda: channel_stats(shared_nsqd, topic, "ch"))
    finally:
        await consumer.stop()
    assert stats["clients"][0]["remote_address"].startswith("127.0.0.2:")


@pytest.fixture(scope="module")
def auth_server() -> Iterator[AuthServer]:
    server = AuthServer().start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def auth_nsqd(module_flavour: str, module_servers: Servers, auth_server: AuthServer) -> Nsqd:
    return nsqd_starter(module_servers, module_flavour)(auth_http_address=auth_server.address)


async def test_auth_secret_is_sent_and_its_grants_apply(auth_nsqd: Nsqd, auth_server: AuthServer,
                                                        topic: str) -> None:
    auth_server.grant("s-ok", Identity("alice", [Grant(f"^{topic}$", [".*"], ["publish", "subscribe"])]))
    config = Config(auth_secret="s-ok")
    got: list[bytes] = []

    async def handler(message: Message) -> None:
        got.append(message.body)

    async with Producer(auth_nsqd.tcp_address, config) as producer:
        await producer.publish(topic, b"authorised")
        with pytest.raises(ServerError) as refused:
            await producer.publish(f"{topic}-other", b"not granted")
        assert refused.value.code == "E_UNAUTHORIZED"
    consumer = Consumer(topic, "ch", config, handler=handler)
    await consumer.connect_to_nsqd(auth_nsqd.tcp_address)
    try:
        await eventually(lambda: got == [b"authorised"])
    finally:
        await consumer.stop()
    assert auth_server.queries_for("s-ok")

    conn = Connection(auth_nsqd.tcp_address, config)
    await conn.connect()
    assert conn.server_settings["auth_required"] is True
    assert conn.server_settings["auth"]["identity"] == "alice"
    conn.close()


async def test_missing_or_wrong_secrets_fail_the_connection_clearly(auth_nsqd: Nsqd, topic: str) -> None:
    without = Producer(auth_nsqd.tcp_address)
    with pytest.raises(IdentifyError, match="requires AUTH and no auth_secret"):
        await without.publish(topic, b"x")
    await without.stop()
    wrong = Producer(auth_nsqd.tcp_address, Config(auth_secret="nobody-knows-this"))
    with pytest.raises(IdentifyError, match="AUTH failed.*E_AUTH_FAILED|E_UNAUTHORIZED"):
        await wrong.publish(topic, b"x")
    await wrong.stop()
