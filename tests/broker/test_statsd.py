"""statsd push: the lines nsqd sends (names, counters vs gauges, prefix with the host),
captured on a UDP socket the test owns; packing and exclusions checked on pure data."""
from __future__ import annotations

import socket
from collections import defaultdict
from typing import Any, Iterator

import pytest

from nsqd.statsd import expand_prefix, pack, stats_lines
from tests.servers import HOST, wait_for


class StatsdCollector:
    """A UDP socket standing in for statsd; keeps every datagram."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind((HOST, 0))
        self.sock.setblocking(False)
        self.packets: list[bytes] = []

    @property
    def address(self) -> str:
        return f"{HOST}:{self.sock.getsockname()[1]}"

    def poll(self) -> "StatsdCollector":
        while True:
            try:
                self.packets.append(self.sock.recv(65536))
            except BlockingIOError:
                return self

    def lines(self) -> list[tuple[str, int, str]]:
        """(name, value, type) in arrival order."""
        out = []
        for packet in self.packets:
            assert packet.endswith(b"\n"), packet
            for line in packet.decode().splitlines():
                name, _, rest = line.partition(":")
                value, _, kind = rest.partition("|")
                out.append((name, int(value), kind))
        return out

    def counters(self) -> dict[str, int]:
        """Counter totals: the sum of every increment sent so far."""
        totals: dict[str, int] = defaultdict(int)
        for name, value, kind in self.lines():
            if kind == "c":
                totals[name] += value
        return totals

    def gauges(self) -> dict[str, int]:
        """Each gauge's latest value."""
        return {name: value for name, value, kind in self.lines() if kind == "g"}

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def collector() -> Iterator[StatsdCollector]:
    c = StatsdCollector()
    yield c
    c.close()


# -- pure functions ---------------------------------------------------------------------
def test_prefix_substitutes_broadcast_address_and_http_port() -> None:
    assert expand_prefix("nsq.%s", "10.0.0.7", 4151) == "nsq.10_0_0_7_4151."
    assert expand_prefix("nsq.%s.", "host.example.com", 80) == "nsq.host_example_com_80."
    assert expand_prefix("apps.queue", "h", 1) == "apps.queue."
    assert expand_prefix("", "h", 1) == ""
    assert expand_prefix("%s", "::1", 4151) == "[__1]_4151."


def test_lines_are_packed_whole_into_packets_of_the_given_size() -> None:
    lines = [f"topic.t{i}.depth:{i}|g" for i in range(40)]
    packets = pack(lines, "nsq.h_1.", 64)
    assert all(len(p) <= 64 for p in packets)
    assert b"".join(packets).decode().splitlines() == [f"nsq.h_1.{line}" for line in lines]
    long_line = "topic." + "x" * 100 + ".depth:1|g"
    assert pack([long_line, "a:1|g"], "", 64) == [f"{long_line}\n".encode(), b"a:1|g\n"]


def _topic(name: str, count: int, channels: list[dict[str, Any]]) -> dict[str, Any]:
    return {"topic_name": name, "message_count": count, "message_bytes": count * 10, "depth": 1,
            "backend_depth": 0, "channels": channels, "e2e_processing_latency": {"count": 0, "percentiles": None}}


def _channel(name: str, count: int) -> dict[str, Any]:
    return {"channel_name": name, "message_count": count, "depth": 2, "backend_depth": 0, "in_flight_count": 1,
            "deferred_count": 0, "requeue_count": 0, "timeout_count": 0, "client_count": 1,
            "e2e_processing_latency": {"count": 3, "percentiles": [{"quantile": 0.99, "value": 1500},
                                                                   {"quantile": 0.5, "value": 700}]}}


def test_counters_are_increments_and_ephemerals_can_be_left_out() -> None:
    before = [_topic("t", 5, [_channel("c", 5)])]
    after = [_topic("t", 8, [_channel("c", 8), _channel("e#ephemeral", 3)]), _topic("x#ephemeral", 4, [])]
    lines = stats_lines(after, before, exclude_ephemeral=True)
    assert "topic.t.message_count:3|c" in lines
    assert "topic.t.message_bytes:30|c" in lines
    assert "topic.t.channel.c.message_count:3|c" in lines
    assert "topic.t.channel.c.e2e_processing_latency_99:1500|g" in lines
    assert "topic.t.channel.c.e2e_processing_latency_50:700|g" in lines
    assert not [line for line in lines if "ephemeral" in line]
    everything = stats_lines(after, before, exclude_ephemeral=False)
    assert "topic.x#ephemeral.message_count:4|c" in everything
    assert "topic.t.channel.e#ephemeral.clients:1|g" in everything


# -- a real nsqd ----------------------------------------------------------------------------
def test_nsqd_pushes_topic_channel_and_memory_stats(servers: Any, collector: StatsdCollector,
                                                    connect: Any, topic: str) -> None:
    nsqd = servers.nsqd(statsd_address=collector.address, statsd_interval="300ms")
    prefix = f"nsq.127_0_0_1_{nsqd.http_port}."
    consumer = connect(nsqd)
    consumer.sub(topic, "ch")
    consumer.expect_ok()
    producer = connect(nsqd)
    for body in (b"one", b"two", b"three"):
        producer.pub(topic, body)
        producer.expect_ok()
    consumer.rdy(1)
    first = consumer.read_message()
    consumer.req(first.id, 60_000)  # deferred for a minute
    consumer.rdy(1)
    consumer.read_message()  # held in flight

    t, c = f"{prefix}topic.{topic}", f"{prefix}topic.{topic}.channel.ch"
    expected_gauges = {f"{c}.depth": 1, f"{c}.in_flight_count": 1, f"{c}.deferred_count": 1,
                       f"{c}.clients": 1, f"{c}.backend_depth": 0, f"{t}.depth": 0, f"{t}.backend_depth": 0}
    expected_counters = {f"{t}.message_count": 3, f"{t}.message_bytes": 11, f"{c}.message_count": 3,
                         f"{c}.requeue_count": 1, f"{c}.timeout_count": 0}

    def reported() -> bool:
        collector.poll()
        gauges, counters = collector.gauges(), collector.counters()
        assert {k: gauges.get(k) for k in expected_gauges} == expected_gauges
        assert {k: counters.get(k) for k in expected_counters} == expected_counters
        # one push spans several datagrams; the memory lines come last
        return memory_names <= {name for name, _, _ in collector.lines()}

    memory_names = {f"{prefix}mem.heap_objects", f"{prefix}mem.gc_runs", f"{prefix}mem.gc_pause_usec_99"}
    wait_for(reported, 10, message="statsd lines for the topic, the channel and memory")
    names = {name for name, _, _ in collector.lines()}
    assert all(name.startswith(prefix) for name in names)
    kinds = {name.rsplit(".", 1)[-1]: kind for name, _, kind in collector.lines()}
    assert kinds["message_count"] == "c" and kinds["depth"] == "g" and kinds["gc_runs"] == "c"

    # later pushes send the counters' increments: nothing new happened, so 0
    pushes = len([1 for name, _, _ in collector.lines() if name == f"{t}.message_count"])
    wait_for(lambda: collector.poll() and len([1 for name, _, _ in collector.lines()
                                              if name == f"{t}.message_count"]) >= pushes + 2, 10)
    assert collector.counters()[f"{t}.message_count"] == 3


def test_prefix_packet_size_ephemeral_and_memory_switches(servers: Any, collector: StatsdCollector,
                                                          connect: Any, topic: str) -> None:
    nsqd = servers.nsqd(statsd_address=collector.address, statsd_interval="300ms", statsd_prefix="apps.queue",
                        statsd_udp_packet_size=64, statsd_exclude_ephemeral="true", statsd_mem_stats="false")
    keep = connect(nsqd)
    keep.sub(topic, "kept")
    keep.expect_ok()
    gone = connect(nsqd)
    gone.sub(topic, "gone#ephemeral")
    gone.expect_ok()
    eph = connect(nsqd)
    eph.sub(f"{topic}#ephemeral", "ch")
    eph.expect_ok()

    wait_for(lambda: collector.poll() and f"apps.queue.topic.{topic}.channel.kept.clients"
             in collector.gauges(), 10, message="the kept channel reported")
    names = {name for name, _, _ in collector.lines()}
    assert not [n for n in names if "ephemeral" in n]
    assert not [n for n in names if ".mem." in n or n.startswith("apps.queue.mem")]
    assert all(n.startswith("apps.queue.topic.") for n in names)
    for packet in collector.packets:
        assert len(packet) <= 64 or packet.count(b"\n") == 1
