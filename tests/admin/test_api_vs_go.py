"""Our nsqadmin and Go's nsqadmin v1.3.0 over the same cluster, asked the same things:
the same keys at every depth, the same numbers, the same statuses and error messages,
the same effect of each action, the same notifications."""
from __future__ import annotations

import base64
import re
import socket
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

from tests.conftest import Servers
from tests.servers import Nsqd, free_port, http, wait_for

from .cluster import (LATENCY_QUANTILES, Cluster, forget_topic, post, registered, start_cluster, started,
                      unregistered)
from .processes import GO_NSQADMIN, AdminProcess, HostNamedNsqd, NotificationReceiver, own_hostname_prefix, start_admin
from .shapes import shape_differences

pytestmark = pytest.mark.skipif(not GO_NSQADMIN.exists(), reason=f"Go nsqadmin not found at {GO_NSQADMIN}")


class Pair:
    def __init__(self, go: AdminProcess, ours: AdminProcess) -> None:
        self.go, self.ours = go, ours

    def both(self, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None):
        return self.go.call(method, path, body, headers), self.ours.call(method, path, body, headers)


@pytest.fixture(scope="module")
def cluster(module_servers: Servers) -> Iterator[Cluster]:
    c = start_cluster(module_servers)
    yield c
    c.consumer.stop()


def _pair(tmp: Path, name: str, flags: dict[str, Any]) -> Pair:
    go = start_admin(tmp / f"go-{name}", flags, GO_NSQADMIN)
    try:
        ours = start_admin(tmp / f"py-{name}", flags)
    except BaseException:
        go.stop()
        raise
    return Pair(go, ours)


@pytest.fixture(scope="module")
def admins(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    pair = _pair(tmp_path_factory.mktemp("admins"), "plain", {"lookupd-http-address": cluster.lookupd.http_address})
    yield pair
    pair.go.stop()
    pair.ours.stop()


@pytest.fixture(scope="module")
def guarded(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Pair, NotificationReceiver]]:
    """Admins that let only alice act, and notify a receiver (at /go and /py)."""
    receiver = NotificationReceiver()
    tmp = tmp_path_factory.mktemp("guarded")
    flags = {"lookupd-http-address": cluster.lookupd.http_address, "admin-user": ["alice", "carol"]}
    go = start_admin(tmp / "go", {**flags, "notification-http-endpoint": receiver.url("/go")}, GO_NSQADMIN)
    ours = start_admin(tmp / "py", {**flags, "notification-http-endpoint": receiver.url("/py")})
    yield Pair(go, ours), receiver
    go.stop()
    ours.stop()
    receiver.close()


# -- reads ------------------------------------------------------------------------------
READS = ["/api/topics", "/api/topics?inactive=true", "/api/topics/cmp", "/api/topics/cmp/ch",
         "/api/topics/solo/a", "/api/topics/cmp/nope", "/api/nodes", "/api/nodes/{nsqd1}", "/api/counter"]



@pytest.mark.parametrize("path", READS)
def test_reads_have_gos_keys(admins: Pair, cluster: Cluster, path: str) -> None:
    go, ours = admins.both("GET", path.format(nsqd1=cluster.nsqd1.http_address))
    assert (ours.status, ours.headers.get("Content-Type")) == (go.status, go.headers.get("Content-Type")) == \
        (200, "application/json; charset=utf-8")
    assert shape_differences(go.json(), ours.json()) == []


def _topic_summary(topic: dict[str, Any]) -> dict[str, Any]:
    return {
        "totals": [topic[k] for k in ("topic_name", "node", "depth", "memory_depth", "message_count", "paused")],
        "nodes": sorted((n["node"], n["hostname"], n["depth"], n["message_count"],
                         sorted(c["channel_name"] for c in n["channels"])) for n in topic["nodes"]),
        "channels": sorted(c["channel_name"] for c in topic["channels"] or []),
        "latency": [(p["quantile"], sorted(p)) for p in topic["e2e_processing_latency"]["percentiles"] or []],
        "message": topic["message"],
    }


def test_topic_numbers_match(admins: Pair) -> None:
    for topic in ("cmp", "solo"):
        go, ours = admins.both("GET", f"/api/topics/{topic}")
        assert _topic_summary(ours.json()) == _topic_summary(go.json())


def _channel_summary(channel: dict[str, Any]) -> dict[str, Any]:
    keys = ("topic_name", "channel_name", "node", "depth", "in_flight_count", "deferred_count", "requeue_count",
            "timeout_count", "message_count", "client_count", "paused")
    clients = [{k: v for k, v in c.items() if k != "connected"} for c in channel["clients"] or []]
    return {"totals": [channel[k] for k in keys], "nodes": sorted((n["node"], n["message_count"]) for n in channel["nodes"]),
            "clients": clients}


def test_channel_numbers_and_clients_match(admins: Pair) -> None:
    go, ours = admins.both("GET", "/api/topics/cmp/ch")
    assert _channel_summary(ours.json()) == _channel_summary(go.json())
    assert ours.json()["clients"][0]["user_agent"].startswith("nsq_tail/")


def test_nodes_node_counter_and_topic_lists_match(admins: Pair, cluster: Cluster) -> None:
    for path in ("/api/topics", "/api/topics?inactive=true", "/api/counter"):
        go, ours = admins.both("GET", path)
        assert ours.json() == go.json(), path
    go, ours = admins.both("GET", "/api/nodes")
    assert sorted(ours.json()["nodes"], key=str) == sorted(go.json()["nodes"], key=str)
    go, ours = admins.both("GET", f"/api/nodes/{cluster.nsqd1.http_address}")
    summary = lambda answer: (answer["node"], answer["total_messages"], answer["total_clients"],  # noqa: E731
                              [t["topic_name"] for t in answer["topics"]])
    assert summary(ours.json()) == summary(go.json()) == (cluster.nsqd1.http_address, 4, 1, ["cmp", "solo"])


# -- a topic's channels: one node's own entry, or a sum grown from the first node's --------
def _channel_rows(answer: dict[str, Any]) -> list[tuple[Any, ...]]:
    return [(c["channel_name"], c["node"], c["depth"], c["message_count"],
             [sorted(p) for p in c["e2e_processing_latency"]["percentiles"] or []]) for c in answer["channels"]]


def test_a_channel_on_one_node_then_on_both_like_go(admins: Pair, cluster: Cluster) -> None:
    """Topic ``grows`` on both nsqds: channel ``g`` on nsqd1 only is listed as nsqd1's own
    entry (its node, its percentiles with ``value``); once nsqd2 has ``g`` too, as the sum."""
    topic, nsqds = "grows", [cluster.nsqd1, cluster.nsqd2]
    try:
        for nsqd in nsqds:
            post(nsqd, f"/topic/create?topic={topic}")
            post(nsqd, f"/channel/create?topic={topic}&channel=both")
            started(nsqd, topic, "both")  # it asked lookupd for channels already: g cannot be copied to nsqd2
        registered(cluster.lookupd, topic, 2)
        post(cluster.nsqd1, f"/channel/create?topic={topic}&channel=g")
        post(cluster.nsqd1, f"/pub?topic={topic}", b"x")
        wait_for(lambda: [cluster.nsqd1.channel(topic, ch)["depth"] for ch in ("both", "g")] == [2, 1],
                 message="nsqd1's channels have its message")
        assert cluster.nsqd2.channel(topic, "g") is None

        go, ours = admins.both("GET", f"/api/topics/{topic}")
        assert shape_differences(go.json(), ours.json()) == []
        p_keys = [["average", "count", "max", "min", "quantile", "value"]] * 2
        assert _channel_rows(ours.json()) == _channel_rows(go.json()) == [
            ("both", "*", 3, 3, p_keys), ("g", cluster.nsqd1.http_address, 1, 1, p_keys)]

        post(cluster.nsqd2, f"/channel/create?topic={topic}&channel=g")
        post(cluster.nsqd2, f"/pub?topic={topic}", b"y")
        wait_for(lambda: [cluster.nsqd2.channel(topic, ch)["depth"] for ch in ("both", "g")] == [2, 1],
                 message="nsqd2's channels have its message")

        go, ours = admins.both("GET", f"/api/topics/{topic}")
        assert shape_differences(go.json(), ours.json()) == []
        assert _channel_rows(ours.json()) == _channel_rows(go.json()) == [
            ("both", "*", 4, 4, p_keys), ("g", "*", 2, 2, p_keys)]
    finally:
        forget_topic(cluster.lookupd, topic, nsqds)


@pytest.fixture(scope="module")
def named_hosts(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Nsqd]]:
    """Two more nsqds of the cluster on hosts of their own, named after this one's (where
    nsqd1 and nsqd2 run) so that they sort after it: ``after-a`` does not measure e2e
    latency, ``after-b`` does."""
    prefix = own_hostname_prefix()
    if prefix is None:
        pytest.skip("no hostname of its own for an nsqd here: unshare --uts is refused (needs root or user namespaces)")
    tmp = tmp_path_factory.mktemp("hosts")
    nodes: dict[str, Nsqd] = {}
    try:
        for name, quantiles in (("after-a", None), ("after-b", LATENCY_QUANTILES)):
            flags: dict[str, Any] = {"lookupd-tcp-address": cluster.lookupd.tcp_address}
            if quantiles:
                flags["e2e-processing-latency-percentile"] = quantiles
            nodes[name] = HostNamedNsqd(tmp / name, flags, f"{socket.gethostname()}-{name}", prefix).start()  # type: ignore[assignment]
        yield nodes
    finally:
        for node in nodes.values():
            node.stop()


def test_channel_sum_follows_the_first_host_like_go(admins: Pair, cluster: Cluster, named_hosts: dict[str, Nsqd]) -> None:
    """Go orders a topic's nodes by hostname and grows each channel's sum from the first
    node's entry: its hostname, and ``value`` on the percentiles only if that node
    measures latency."""
    here, a, b = cluster.nsqd1, named_hosts["after-a"], named_hosts["after-b"]
    holders = {"hosts_measured_first": [here, a], "hosts_unmeasured_first": [a, b]}
    expected = {"hosts_measured_first": (socket.gethostname(), True),
                "hosts_unmeasured_first": (f"{socket.gethostname()}-after-a", False)}
    try:
        for topic, nsqds in holders.items():
            for nsqd in nsqds:
                post(nsqd, f"/topic/create?topic={topic}")
                post(nsqd, f"/channel/create?topic={topic}&channel=hc")
            registered(cluster.lookupd, topic, 2)
        for topic, (first, valued) in expected.items():
            go, ours = admins.both("GET", f"/api/topics/{topic}")
            assert shape_differences(go.json(), ours.json()) == [], topic
            for answer in (go.json(), ours.json()):
                assert answer["nodes"][0]["hostname"] == first, topic
                (channel,) = answer["channels"]
                assert (channel["node"], channel["hostname"]) == ("*", first), topic
                percentiles = channel["e2e_processing_latency"]["percentiles"]
                assert len(percentiles) == 2 and all(("value" in p) == valued for p in percentiles), (topic, percentiles)
    finally:
        for topic, nsqds in holders.items():
            forget_topic(cluster.lookupd, topic, nsqds)


# -- bad input ----------------------------------------------------------------------------
SAME_ANSWER = [
    ("GET", "/api/nodes/nope:1", None, 404, "NODE_NOT_FOUND"),
    ("POST", "/api/topics/cmp", {"action": "bogus"}, 400, "INVALID_ACTION"),
    ("POST", "/api/topics/cmp/ch", {}, 400, "INVALID_ACTION"),
    ("POST", "/api/topics/cmp", b"", 400, "EOF"),
    ("POST", "/api/topics", {"topic": "bad topic!"}, 400, "INVALID_TOPIC"),
    ("POST", "/api/topics", {"topic": "fine", "channel": "bad chan!"}, 400, "INVALID_CHANNEL"),
    ("DELETE", "/api/nodes/nope:1", b"{{", 400, "INVALID_BODY"),
    ("DELETE", "/api/nodes/nope:1", {"topic": "bad topic!"}, 400, "INVALID_TOPIC"),
    ("GET", "/nothing/here", None, 404, "NOT_FOUND"),
    ("PUT", "/api/topics", None, 405, "METHOD_NOT_ALLOWED"),
    ("GET", "/config/nope", None, 400, "INVALID_OPTION"),
    ("PUT", "/config/log_level", b"loud", 400, "INVALID_VALUE"),
    ("PUT", "/config/http_address", b"x", 400, "INVALID_OPTION"),
]


@pytest.mark.parametrize("method,path,body,status,message", SAME_ANSWER)
def test_bad_input_answers_like_go(admins: Pair, method: str, path: str, body: Any, status: int, message: str) -> None:
    go, ours = admins.both(method, path, body)
    assert (go.status, go.json()) == (status, {"message": message})
    assert (ours.status, ours.json()) == (status, {"message": message})
    if status == 405:
        assert ours.headers["Allow"] == go.headers["Allow"]


def test_bad_json_is_400_with_a_message(admins: Pair) -> None:
    go, ours = admins.both("POST", "/api/topics/cmp", b"xx")
    assert go.status == ours.status == 400
    assert ours.json()["message"]


def test_unknown_topics_are_upstream_errors_like_go(admins: Pair) -> None:
    """Go answers 502 for a topic no lookupd knows (lookupd's 404 TOPIC_NOT_FOUND, passed
    on), and for a topic that lookupd knows but no nsqd holds."""
    for path in ("/api/topics/nope", "/api/topics/nope/ch", "/api/topics/ghost"):
        go, ours = admins.both("GET", path)
        assert ours.status == go.status == 502, path
        assert ours.json()["message"].split(":")[:2] == go.json()["message"].split(":")[:2], path
    go, ours = admins.both("GET", "/api/topics/nope")
    assert "TOPIC_NOT_FOUND" in go.json()["message"] and "TOPIC_NOT_FOUND" in ours.json()["message"]


def test_config_values_like_go(admins: Pair) -> None:
    for opt in ("nsqlookupd_http_addresses", "nsqd_http_addresses", "http_client_connect_timeout",
                "http_client_request_timeout", "http_client_tls_insecure_skip_verify", "http_client_tls_root_ca_file",
                "allow_config_from_cidr", "notification_http_endpoint", "acl_http_header", "admin_users",
                "log_level", "log_prefix", "base_path"):
        go, ours = admins.both("GET", f"/config/{opt}")
        assert (ours.status, ours.body) == (go.status, go.body), opt
    for admin in (admins.go, admins.ours):
        assert (admin.call("PUT", "/config/log_level", b"debug").body, admin.call("GET", "/config/log_level").body) == (b"1", b"1")
        assert admin.call("PUT", "/config/log_level", b"info").status == 200
    go, ours = admins.both("GET", "/ping")
    assert (ours.status, ours.body) == (go.status, go.body) == (200, b"OK")


# -- actions ------------------------------------------------------------------------------
def _paused(cluster: Cluster, topic: str, channel: str | None = None) -> list[bool]:
    nodes = [n for n in (cluster.nsqd1, cluster.nsqd2) if n.topic(topic)]
    return [bool((n.channel(topic, channel) if channel else n.topic(topic))["paused"]) for n in nodes]


@pytest.mark.parametrize("side", ["go", "ours"])
def test_pause_unpause_and_empty_reach_every_node(admins: Pair, cluster: Cluster, side: str) -> None:
    admin = getattr(admins, side)
    answers = []
    for verb, path, expect in (("pause", "/api/topics/cmp/ch", [True, True]), ("unpause", "/api/topics/cmp/ch", [False, False])):
        answer = admin.call("POST", path, {"action": verb})
        answers.append((answer.status, answer.json()))
        assert _paused(cluster, "cmp", "ch") == expect
    answer = admin.call("POST", "/api/topics/solo", {"action": "pause"})
    assert (answer.status, _paused(cluster, "solo")) == (200, [True])
    assert admin.call("POST", "/api/topics/solo", {"action": "unpause"}).status == 200
    assert _paused(cluster, "solo") == [False]
    post(cluster.nsqd1, "/pub?topic=solo", b"x")
    wait_for(lambda: cluster.nsqd1.channel("solo", "a")["depth"] >= 1)
    assert admin.call("POST", "/api/topics/solo/a", {"action": "empty"}).status == 200
    assert cluster.nsqd1.channel("solo", "a")["depth"] == 0
    assert answers == [(200, {"message": ""})] * 2


def test_a_node_without_the_channel_is_a_warning_like_go(admins: Pair, cluster: Cluster) -> None:
    post(cluster.nsqd1, "/channel/create?topic=cmp&channel=only1")
    go, ours = admins.both("POST", "/api/topics/cmp/only1", {"action": "pause"})
    assert go.status == ours.status == 200
    for answer in (go, ours):
        assert answer.json()["message"].startswith("WARNING: ") and "CHANNEL_NOT_FOUND" in answer.json()["message"]
    assert cluster.nsqd1.channel("cmp", "only1")["paused"] is True


@pytest.mark.parametrize("side", ["go", "ours"])
def test_create_delete_and_tombstone(admins: Pair, cluster: Cluster, side: str) -> None:
    admin = getattr(admins, side)
    lookupd = cluster.lookupd
    topic = f"made_{side}"
    post(cluster.nsqd2, f"/pub?topic={topic}", b"x")
    registered(lookupd, topic, 1)
    assert admin.call("POST", "/api/topics", {"topic": topic, "channel": "mc"}).json() == {"message": ""}
    assert "mc" in lookupd.get_json(f"/channels?topic={topic}")["channels"]
    assert cluster.nsqd2.channel(topic, "mc") is not None, "the channel is made on the nsqd holding the topic"
    assert admin.call("DELETE", f"/api/topics/{topic}/mc").json() == {"message": ""}
    assert cluster.nsqd2.channel(topic, "mc") is None
    assert admin.call("DELETE", f"/api/nodes/{cluster.nsqd2.http_address}", {"topic": topic}).json() == {"message": ""}
    assert cluster.nsqd2.topic(topic) is None, "a tombstone deletes the topic on that node"
    unregistered(lookupd, cluster.nsqd2, topic)  # else a registration still on its way could bring the topic back
    assert admin.call("DELETE", f"/api/topics/{topic}").json() == {"message": ""}
    assert topic not in lookupd.get_json("/topics")["topics"]


# -- who may act, and who is told ---------------------------------------------------------
ALICE = {"X-Forwarded-User": "alice", "Authorization": "Basic " + base64.b64encode(b"bob:pw").decode(),
         "User-Agent": "admin-test/1"}


def test_only_admin_users_act(guarded: tuple[Pair, NotificationReceiver], cluster: Cluster) -> None:
    pair, _ = guarded
    refused = [("POST", "/api/topics/cmp/ch", {"action": "pause"}), ("POST", "/api/topics", {"topic": "x"}),
               ("DELETE", "/api/topics/cmp", None), ("DELETE", "/api/topics/cmp/ch", None),
               ("DELETE", f"/api/nodes/{cluster.nsqd1.http_address}", {"topic": "cmp"})]
    for method, path, body in refused:
        for headers in (None, {"X-Forwarded-User": "mallory"}):
            go, ours = pair.both(method, path, body, headers)
            assert (go.status, go.json()) == (ours.status, ours.json()) == (403, {"message": "FORBIDDEN"}), (method, path)
    assert _paused(cluster, "cmp", "ch") == [False, False]
    assert cluster.nsqd1.topic("cmp") is not None


def test_actions_notify_like_go(guarded: tuple[Pair, NotificationReceiver], cluster: Cluster) -> None:
    pair, receiver = guarded
    started = time.time()
    go, ours = pair.both("POST", "/api/topics/cmp/ch", {"action": "pause"}, ALICE)
    assert go.status == ours.status == 200
    assert _paused(cluster, "cmp", "ch") == [True, True]
    go, ours = pair.both("POST", "/api/topics/cmp/ch", {"action": "unpause"}, {**ALICE, "X-Forwarded-User": "carol"})
    assert go.status == ours.status == 200
    go, ours = pair.both("POST", "/api/topics", {"topic": "noted", "channel": "nc"}, ALICE)
    assert go.status == ours.status == 200
    for action in ("pause_channel", "unpause_channel", "create_topic", "create_channel"):
        (go_headers, go_note), (py_headers, py_note) = receiver.wait_for("/go", action), receiver.wait_for("/py", action)
        assert list(py_note) == list(go_note), action
        assert py_headers["Content-Type"] == go_headers["Content-Type"] == "application/json"
        for key in ("action", "topic", "user", "user_agent", "via"):
            assert py_note.get(key) == go_note.get(key), (action, key)
        assert py_note.get("channel") == go_note.get("channel")
        assert re.fullmatch(r"127\.0\.0\.1:\d+", py_note["remote_ip"])
        assert py_note["url"] == go_note["url"].replace(str(pair.go.http_port), str(pair.ours.http_port))
        assert started - 1 <= py_note["timestamp"] <= time.time() + 1
    assert go_note["user"] == "bob"  # the basic-auth user, as Go reports it


# -- nsqd mode: a dead nsqd, a base path, /config from elsewhere ---------------------------
@pytest.fixture(scope="module")
def direct(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Pair, str]]:
    dead = f"127.0.0.1:{free_port('127.0.0.1')}"
    flags = {"nsqd-http-address": [cluster.nsqd1.http_address, dead], "base-path": "/nsq/",
             "allow-config-from-cidr": "10.0.0.0/8", "http-client-connect-timeout": "1s"}
    pair = _pair(tmp_path_factory.mktemp("direct"), "direct", flags)
    yield pair, dead
    pair.go.stop()
    pair.ours.stop()


def test_an_unreachable_nsqd_is_a_warning_not_a_failure(direct: tuple[Pair, str]) -> None:
    pair, dead = direct
    for path in ("/nsq/api/topics", "/nsq/api/nodes", "/nsq/api/counter", "/nsq/api/topics/solo"):
        go, ours = pair.both("GET", path)
        assert ours.status == go.status == 200, path
        assert shape_differences(go.json(), ours.json()) == [], path
        if path != "/nsq/api/topics/solo":  # Go asks only the nsqds holding it; the dead one is unknown
            assert ours.json()["message"].startswith("WARNING: ") and dead in ours.json()["message"], path
    go, ours = pair.both("GET", "/nsq/api/topics")
    assert ours.json()["topics"] == go.json()["topics"] == ["cmp", "solo"]
    go, ours = pair.both("GET", f"/nsq/api/nodes/{dead}")
    assert (ours.status, ours.json()) == (go.status, go.json()) == (404, {"message": "NODE_NOT_FOUND"})


def test_base_path_and_config_cidr(direct: tuple[Pair, str]) -> None:
    pair, _ = direct
    go, ours = pair.both("GET", "/nsq/ping")
    assert (ours.status, ours.body) == (go.status, go.body) == (200, b"OK")
    go, ours = pair.both("GET", "/api/topics")
    assert ours.status == go.status == 404
    go, ours = pair.both("GET", "/nsq/config/log_level")
    assert (ours.status, ours.json()) == (go.status, go.json()) == (403, {"message": "FORBIDDEN"})
    page = pair.ours.call("GET", "/nsq/topics/solo")
    assert page.status == 200 and b'src="/nsq/static/app.js"' in page.body
    assert pair.ours.call("GET", "/nsq/static/app.js").status == 200
