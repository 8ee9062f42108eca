"""The client's own HTTP GET (nsq_client.http_get), which lookupd discovery and nsq_stat
use so that the client needs no HTTP library: against our and Go's nsqlookupd and nsqd,
and on answers cut short or chunked."""
from __future__ import annotations

import socket

import pytest

from nsq_client import AdminError
from nsq_client.http_get import get_json, parse_answer
from nsq_client.lookup import LookupdQueries, NsqdNode, nodes_with_topic
from tests.client.helpers import eventually
from tests.conftest import Servers
from tests.reference import FLAVOURS, NSQLOOKUPD_REF, GoNsqd, GoNsqlookupd, flavour_or_skip, skip_unless_present
from tests.servers import Nsqd, Nsqlookupd


@pytest.fixture(scope="module", params=FLAVOURS)
def cluster(request: pytest.FixtureRequest, module_servers: Servers) -> tuple[Nsqlookupd, Nsqd]:
    """A lookupd and an nsqd registered with it, both ours or both Go's."""
    if flavour_or_skip(request.param) == "go":
        skip_unless_present(NSQLOOKUPD_REF, "NSQLOOKUPD_REF")
    go = request.param == "go"
    lookupd = module_servers.lookupd(kind=GoNsqlookupd if go else Nsqlookupd)
    nsqd = module_servers.nsqd(kind=GoNsqd if go else Nsqd, lookupd_tcp_address=lookupd.tcp_address)
    return lookupd, nsqd


async def test_lookup_finds_the_nsqd_with_the_topic_and_none_for_an_unknown_one(cluster: tuple[Nsqlookupd, Nsqd]) -> None:
    lookupd, nsqd = cluster
    nsqd.post("/topic/create?topic=http_get_known")
    queries = LookupdQueries(lookupd.http_address)
    with pytest.raises(AdminError) as refused:
        await queries.lookup("http_get_unknown")
    assert refused.value.status == 404 and refused.value.message == "TOPIC_NOT_FOUND"
    assert await nodes_with_topic(queries, "http_get_unknown") == []
    # the registration reaches lookupd over nsqd's TCP connection to it, a moment later
    async def registered() -> list[NsqdNode]:
        return await nodes_with_topic(queries, "http_get_known")

    nodes: list[NsqdNode] = await eventually(registered, message="registered")
    assert [n.tcp_address for n in nodes] == [nsqd.tcp_address]
    assert [p["tcp_port"] for p in await queries.nodes()] == [int(nsqd.tcp_address.rsplit(":", 1)[1])]


async def test_a_large_answer_is_read_whole(cluster: tuple[Nsqlookupd, Nsqd]) -> None:
    """Large enough that a server would chunk it for HTTP/1.1 (Go from 2 KiB)."""
    _, nsqd = cluster
    names = {f"http_get_many_{i:03}" for i in range(150)}
    for name in names:
        nsqd.post(f"/topic/create?topic={name}")
    stats = await get_json(nsqd.http_address, "/stats", {"format": "json", "include_clients": "false"})
    assert names <= {t["topic_name"] for t in stats["topics"]}


async def test_a_server_that_is_not_there_is_an_os_error() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{sock.getsockname()[1]}"  # bound, not listening: refused
        with pytest.raises(OSError):
            await get_json(address, "/ping", timeout=5)


def test_answers_with_a_length_chunks_or_neither() -> None:
    assert parse_answer(b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\n{}") == (200, b"{}")
    assert parse_answer(b"HTTP/1.1 404 Not Found\r\n\r\n{\"message\":\"TOPIC_NOT_FOUND\"}") == (
        404, b'{"message":"TOPIC_NOT_FOUND"}')
    chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\n[1,\r\na;ext\r\n2,3,4,5,6]\r\n0\r\n\r\n"
    assert parse_answer(chunked) == (200, b"[1,2,3,4,5,6]")


@pytest.mark.parametrize("answer", [
    b"HTTP/1.0 200 OK\r\nContent-Length: 10\r\n\r\n{}",                   # cut short
    b"HTTP/1.0 200 OK\r\nContent-Le",                                      # no end of the head
    b"SSH-2.0-OpenSSH\r\n\r\n",                                            # not HTTP
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n10\r\nabc",      # inside a chunk
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n",  # no chunk size
])
def test_a_broken_answer_is_a_connection_error(answer: bytes) -> None:
    with pytest.raises(ConnectionResetError):
        parse_answer(answer)
