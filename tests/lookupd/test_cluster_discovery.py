"""Discovery across a cluster of real processes: two nsqlookupds, three nsqds registered
with both, and pynsq's ``Reader`` given nothing but the lookupds' HTTP addresses.

The reader must find every nsqd carrying the topic and consume from each of them; a
lookupd restarted on the same ports must get every registration back (producers,
topics, channels) from the nsqds alone, serve discovery again, and nothing published
meanwhile may be lost.
"""
from __future__ import annotations

import json
import uuid
from collections import Counter
from pathlib import Path
from typing import Iterator

import pytest

from tests.conftest import Servers
from tests.interop.client_process import ClientProcess, Clients, Record
from tests.servers import Nsqd, Nsqlookupd, wait_for

pytestmark = [pytest.mark.interop, pytest.mark.timeout(40)]

READER_SCRIPT = Path(__file__).with_name("pynsq_lookupd_reader.py")  # absolute: Clients runs it as is
PER_NSQD = 20  # messages per nsqd per batch
WAIT = 15.0


@pytest.fixture
def clients(tmp_path: Path) -> Iterator[Clients]:
    started = Clients(tmp_path)
    yield started
    started.close()


@pytest.fixture
def topic() -> str:
    return f"cluster-{uuid.uuid4().hex[:8]}"


def publish(nsqd: Nsqd, topic: str, batch: str) -> set[str]:
    """PER_NSQD bodies naming this nsqd and the batch, in one /mpub; returns them."""
    bodies = [json.dumps({"nsqd": nsqd.tcp_address, "batch": batch, "n": n}, separators=(",", ":"))
              for n in range(PER_NSQD)]
    answer = nsqd.post(f"/mpub?topic={topic}", "\n".join(bodies).encode())
    assert (answer.status, answer.body) == (200, b"OK"), answer
    return set(bodies)


def publish_everywhere(nsqds: list[Nsqd], topic: str, batch: str) -> set[str]:
    return set().union(*(publish(nsqd, topic, batch) for nsqd in nsqds))


def delivered(reader: ClientProcess) -> Counter[str]:
    return Counter(str(r["body"]) for r in reader.records() if "body" in r)


def wait_delivered(reader: ClientProcess, expected: set[str], what: str) -> None:
    reader.wait_until(lambda records: expected <= {str(r["body"]) for r in records if "body" in r},
                      WAIT, what)


def assert_each_once_from_its_nsqd(reader: ClientProcess, published: set[str]) -> None:
    counts = delivered(reader)
    assert set(counts) == published, (f"missing {sorted(published - set(counts))[:3]}, "
                                      f"unexpected {sorted(set(counts) - published)[:3]}")
    assert max(counts.values()) == 1, [b for b, n in counts.items() if n > 1][:3]
    records: list[Record] = [r for r in reader.records() if "body" in r]
    wrong = [r for r in records if r["nsqd"] != json.loads(str(r["body"]))["nsqd"]]
    assert not wrong, f"delivered by another nsqd than the one it was published to: {wrong[:3]}"


def knows_cluster(lookupd: Nsqlookupd, nsqds: list[Nsqd], topic: str, channels: dict[str, list[str]]) -> bool:
    """lookupd lists every nsqd as a producer of ``topic``, as a node with exactly its
    topics, and every channel of each topic."""
    ports = {nsqd.tcp_port for nsqd in nsqds}
    lookup = lookupd.get(f"/lookup?topic={topic}")
    if lookup.status != 200 or {p["tcp_port"] for p in lookup.json()["producers"]} != ports:
        return False
    nodes = {n["tcp_port"]: n for n in lookupd.get("/nodes").json()["producers"]}
    for index, nsqd in enumerate(nsqds):
        node = nodes.get(nsqd.tcp_port)
        if node is None or sorted(node["topics"]) != sorted([topic, own_topic(topic, index)]):
            return False
        assert (node["broadcast_address"], node["http_port"]) == (nsqd.host, nsqd.http_port), node
    return all(lookupd.get(f"/channels?topic={t}").json()["channels"] == names for t, names in channels.items())


def wait_knows_cluster(lookupd: Nsqlookupd, nsqds: list[Nsqd], topic: str, channels: dict[str, list[str]],
                       what: str) -> None:
    wait_for(lambda: knows_cluster(lookupd, nsqds, topic, channels), WAIT, message=f"{lookupd.http_address}: {what}")


def own_topic(topic: str, index: int) -> str:
    return f"{topic}-only-{index}"


def subscribed_everywhere(nsqds: list[Nsqd], topic: str, channel: str) -> bool:
    return all((c := nsqd.channel(topic, channel)) is not None and len(c["clients"]) == 1 for nsqd in nsqds)


def test_pynsq_finds_every_nsqd_through_lookupd_and_a_restarted_lookupd_gets_everything_back(
        servers: Servers, clients: Clients, topic: str) -> None:
    lookupds = [servers.lookupd(tcp_port=0, http_port=0) for _ in range(2)]
    lookupd_tcp = [lookupd.tcp_address for lookupd in lookupds]
    nsqds = [servers.nsqd(lookupd_tcp_address=lookupd_tcp) for _ in range(3)]
    channels = {topic: ["discovery"]}
    for index, nsqd in enumerate(nsqds):  # one topic of its own each, with a channel, for /nodes
        assert nsqd.post(f"/topic/create?topic={own_topic(topic, index)}").status == 200
        assert nsqd.post(f"/channel/create?topic={own_topic(topic, index)}&channel=audit").status == 200
        channels[own_topic(topic, index)] = ["audit"]
    published = publish_everywhere(nsqds, topic, "before-reader")
    for lookupd in lookupds:
        wait_knows_cluster(lookupd, nsqds, topic, {**channels, topic: []}, "knows all three nsqds")

    reader = clients.start(str(READER_SCRIPT), "--topic", topic, "--channel", "discovery",
                           *[f"--lookupd-http={lookupd.http_address}" for lookupd in lookupds])
    wait_delivered(reader, published, "the reader consumed from all three nsqds")
    assert {r["nsqd"] for r in reader.records() if "body" in r} == {nsqd.tcp_address for nsqd in nsqds}
    for lookupd in lookupds:
        wait_knows_cluster(lookupd, nsqds, topic, channels, "the reader's channel registered by every nsqd")

    restarted = lookupds[0]
    assert restarted.stop() == 0
    published |= publish_everywhere(nsqds, topic, "lookupd-down")
    restarted.start()  # same ports: the nsqds reconnect on their own
    published |= publish_everywhere(nsqds, topic, "lookupd-restarting")
    wait_knows_cluster(restarted, nsqds, topic, channels, "every registration back after the restart")
    assert knows_cluster(lookupds[1], nsqds, topic, channels), "the other lookupd was not disturbed"

    # the restarted lookupd alone is enough to find the whole cluster again
    late_reader = clients.start(str(READER_SCRIPT), "--topic", topic, "--channel", "late",
                                f"--lookupd-http={restarted.http_address}")
    wait_for(lambda: subscribed_everywhere(nsqds, topic, "late"), WAIT,
             message="a reader knowing only the restarted lookupd subscribed on all three nsqds")
    after = publish_everywhere(nsqds, topic, "after-restart")
    published |= after
    wait_delivered(reader, published, "the first reader got every batch")
    wait_delivered(late_reader, after, "the late reader got the batch published after it subscribed")

    assert_each_once_from_its_nsqd(reader, published)
    assert_each_once_from_its_nsqd(late_reader, after)
    assert len(published) == 4 * 3 * PER_NSQD
