"""The pure parts: nsqd answers reshaped and summed, lookupd answers merged."""
from __future__ import annotations

from nsqadmin import producers, stats


def _channel(name: str, depth: int, messages: int, clients: int = 0, paused: bool = False,
             p99: int | None = None, count: int = 0) -> dict:
    latency = {"count": count, "percentiles": None if p99 is None else [{"quantile": 0.99, "value": p99}]}
    return {"channel_name": name, "depth": depth, "backend_depth": 1, "in_flight_count": 2, "deferred_count": 0,
            "message_count": messages, "requeue_count": 1, "timeout_count": 0, "client_count": clients,
            "clients": [], "paused": paused, "e2e_processing_latency": latency}


def _topic(name: str, messages: int, channels: list[dict], paused: bool = False) -> dict:
    return {"topic_name": name, "depth": 3, "backend_depth": 1, "message_count": messages, "paused": paused,
            "channels": channels, "e2e_processing_latency": {"count": 0, "percentiles": None}}


def test_a_topic_sums_its_nodes_and_channels() -> None:
    a = stats.node_topic("10.0.0.1:4151", "a", _topic("t", 5, [_channel("c", 4, 5, clients=1, p99=100, count=3),
                                                               _channel("only", 1, 5)]))
    b = stats.node_topic("10.0.0.2:4151", "b", _topic("t", 7, [_channel("c", 6, 7, paused=True, p99=300, count=1)]))
    total = stats.sum_topic("t", [b, a])
    assert (total["node"], total["message_count"], total["depth"], total["memory_depth"]) == ("*", 12, 6, 4)
    assert [n["node"] for n in total["nodes"]] == ["10.0.0.1:4151", "10.0.0.2:4151"]  # by host
    summed, single = total["channels"]
    assert (summed["node"], summed["depth"], summed["message_count"], summed["client_count"], summed["paused"]) == \
        ("*", 10, 12, 1, True)
    assert [n["node"] for n in summed["nodes"]] == ["10.0.0.1:4151", "10.0.0.2:4151"]
    assert single is a["channels"][1], "a channel one node holds is that node's entry, as in Go"
    p99 = summed["e2e_processing_latency"]["percentiles"][0]
    assert (p99["max"], p99["min"], p99["count"], p99["average"]) == (300, 100, 4, 150.0)
    assert summed["e2e_processing_latency"]["host"] == "*"


def test_a_channel_several_nodes_hold_is_grown_from_the_first_by_host_as_in_go() -> None:
    """Go adds later nodes into the first node's own entry: the sum keeps that node's
    hostname and, on each percentile it reported, its ``value``; a node without
    percentiles first gives a sum without ``value``."""
    measured = stats.node_topic("10.0.0.1:4151", "m", _topic("t", 5, [_channel("c", 0, 5, p99=100, count=3)]))
    unmeasured = stats.node_topic("10.0.0.2:4151", "u", _topic("t", 7, [_channel("c", 1, 7)]))
    late = stats.node_topic("10.0.0.3:4151", "z", _topic("t", 1, [_channel("c", 0, 1, p99=300, count=1)]))

    measured_first = stats.sum_topic("t", [late, unmeasured, measured])["channels"][0]
    assert (measured_first["node"], measured_first["hostname"], measured_first["message_count"]) == ("*", "m", 13)
    assert [n["hostname"] for n in measured_first["nodes"]] == ["m", "u", "z"]
    latency = measured_first["e2e_processing_latency"]
    assert (latency["topic"], latency["channel"], latency["host"]) == ("", "", "*")
    assert latency["percentiles"] == [{"average": 150.0, "count": 4, "max": 300, "min": 100, "quantile": 0.99, "value": 100}]

    unmeasured_first = stats.sum_topic("t", [late, unmeasured])["channels"][0]
    assert unmeasured_first["hostname"] == "u"
    assert unmeasured_first["e2e_processing_latency"]["percentiles"] == [
        {"average": 300.0, "count": 1, "max": 300, "min": 300, "quantile": 0.99}]
    assert "value" in late["channels"][0]["e2e_processing_latency"]["percentiles"][0], "node entries are left as they were"
    channel = stats.sum_channel("t", "c", [late["channels"][0], measured["channels"][0]])  # a channel's own answer
    assert channel["hostname"] == "" and "value" not in channel["e2e_processing_latency"]["percentiles"][0]


def test_node_entries_in_gos_shape() -> None:
    raw = _channel("c", 4, 5)
    raw["clients"] = [{"client_id": "x", "hostname": "h", "version": "V2", "remote_address": "1.2.3.4:5",
                       "connect_ts": 1000, "ready_count": 3, "snappy": True, "tls": True, "tls_version": "TLS1.3"}]
    channel = stats.node_channel("n:1", "h", "t", raw, now=1010.7)
    client = channel["clients"][0]
    assert client["connected"] == 10_000_000_000 and client["node"] == "n:1" and client["ready_count"] == 3
    assert (client["snappy"], client["deflate"], client["tls"], client["tls_version"]) == (True, False, True, "TLS1.3")
    assert channel["memory_depth"] == 3 and channel["nodes"] is None
    latency = stats.node_latency({"count": 2, "percentiles": [{"quantile": 0.5, "value": 7}]})
    assert latency["percentiles"] == [{"average": 7, "count": 2, "max": 7, "min": 7, "quantile": 0.5, "value": 7}]


def test_counters_and_totals() -> None:
    topics = [stats.node_topic("n:1", "h", _topic("t", 5, [_channel("c", 0, 5, clients=2)])),
              stats.node_topic("n:1", "h", _topic("u", 1, [_channel("c", 0, 1)]))]
    assert stats.counters(topics) == {
        "t:c:n:1": {"node": "n:1", "topic_name": "t", "channel_name": "c", "message_count": 5},
        "u:c:n:1": {"node": "n:1", "topic_name": "u", "channel_name": "c", "message_count": 1}}
    assert stats.node_totals(topics) == (6, 2)


def test_lookupd_nodes_merge_by_tcp_address() -> None:
    def node(remote: str, version: str, port: int) -> dict:
        return {"remote_address": remote, "hostname": "h", "broadcast_address": "10.0.0.1", "tcp_port": port,
                "http_port": port + 1, "version": version, "topics": ["b", "a"], "tombstones": [False, True]}
    merged = producers.merge_lookupd_nodes([("l1:4161", [node("r1", "1.3.0", 4150), node("r3", "1.2.1", 5150)]),
                                            ("l2:4161", [node("r2", "1.3.0", 4150)])])
    first = merged[0].to_json()
    assert first["remote_addresses"] == ["l1:4161/r1", "l2:4161/r2"]
    assert first["topics"] == [{"topic": "a", "tombstoned": True}, {"topic": "b", "tombstoned": False}]
    assert [p.out_of_date for p in merged] == [False, True]
    assert producers.search(merged, "10.0.0.1:5151") is merged[1]
    assert producers.version_key("garbage") == (0, 0, 0)
