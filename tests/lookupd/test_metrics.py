"""nsqlookupd's Prometheus /metrics (beyond NSQ): producers, topics and channels, parsed
with prometheus_client's parser while real nsqds register and a producer is tombstoned."""
from __future__ import annotations

import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import Servers
from tests.promtool import promtool_problems
from tests.servers import http, wait_for


def scrape(url: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    with urllib.request.urlopen(url, timeout=10) as resp:
        assert resp.headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
        text = resp.read().decode()
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def test_metrics_follow_registrations(servers: Servers, topic: str) -> None:
    lookupd = servers.lookupd(tcp_port=0, http_port=0)
    empty = scrape(lookupd.url("/metrics"))
    assert empty[("nsqlookupd_producers", frozenset())] == 0
    assert empty[("nsqlookupd_topics", frozenset())] == 0

    first = servers.nsqd(lookupd_tcp_address=lookupd.tcp_address)
    second = servers.nsqd(lookupd_tcp_address=lookupd.tcp_address)
    for nsqd in (first, second):
        assert http("POST", nsqd.url(f"/topic/create?topic={topic}"))[0] == 200
        assert http("POST", nsqd.url(f"/channel/create?topic={topic}&channel=a"))[0] == 200
    assert http("POST", first.url(f"/channel/create?topic={topic}&channel=b"))[0] == 200
    labels = frozenset({("topic", topic)})

    def registered() -> dict:
        samples = scrape(lookupd.url("/metrics"))
        assert samples[("nsqlookupd_producers", frozenset())] == 2
        assert samples[("nsqlookupd_topic_producers", labels)] == 2
        assert samples[("nsqlookupd_topic_channels", labels)] == 2
        return samples

    samples = wait_for(registered, 10, message="both nsqds registered")
    assert samples[("nsqlookupd_topics", frozenset())] == 1
    assert samples[("nsqlookupd_channels", frozenset())] == 2

    node = f"127.0.0.1:{first.http_port}"
    assert http("POST", lookupd.url(f"/topic/tombstone?topic={topic}&node={node}"))[0] == 200
    after = scrape(lookupd.url("/metrics"))
    assert after[("nsqlookupd_topic_producers", labels)] == 1  # what /lookup would answer
    assert after[("nsqlookupd_producers", frozenset())] == 2
    with urllib.request.urlopen(lookupd.url("/metrics"), timeout=10) as resp:
        assert promtool_problems(resp.read().decode()) == ""
