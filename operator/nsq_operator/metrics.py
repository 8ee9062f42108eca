"""The operator's own /metrics: where each NsqCluster's rolling upgrade or scale-down
stands (phase, how long in it, failed attempts), read from kopf's in-memory index of the
clusters (fed by its watch: a scrape costs no API request). The chart's alert "a roll
stuck in one phase" reads these."""
from __future__ import annotations

import datetime
from wsgiref.simple_server import WSGIServer
from typing import Any, Iterator, Mapping

import kopf
from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from nsq_protocol.host_port import split_listen_address

from .models import RolloutStatus
from .rollout import progress


def rollout_of(body: kopf.Body, **_: Any) -> dict[Any, Any]:
    """kopf index function: an NsqCluster's status.rollout by (namespace, name)."""
    meta = body["metadata"]
    return {(meta["namespace"], meta["name"]): dict((body.get("status") or {}).get("rollout") or {})}


class RolloutCollector(Collector):
    def __init__(self, runtime: Any) -> None:
        self.runtime = runtime  # its rollout_index is kopf's, once kopf hands it to a handler (runtime_of)

    def collect(self) -> Iterator[Metric]:
        labels = ["namespace", "cluster", "phase"]
        clusters = GaugeMetricFamily("nsq_operator_clusters", "NsqClusters the operator runs.")
        rolling = GaugeMetricFamily("nsq_operator_rollout_in_progress",
                                    "1 while a rolling upgrade or scale-down is under way, labelled with its phase.",
                                    labels=labels)
        seconds = GaugeMetricFamily("nsq_operator_rollout_phase_seconds",
                                    "Seconds the roll under way has been in its current phase.", labels=labels)
        failures = GaugeMetricFamily("nsq_operator_rollout_failures",
                                     "Failed attempts in a row of the roll under way (0: not stopped).",
                                     labels=["namespace", "cluster"])
        at = datetime.datetime.now(datetime.timezone.utc)
        count = 0
        for (namespace, cluster), store in list((self.runtime.rollout_index or {}).items()):
            for raw in store:
                count += 1
                state = RolloutStatus.model_validate(raw) if raw else None
                if not progress.active(state):
                    continue
                assert state is not None
                rolling.add_metric([namespace, cluster, state.phase], 1)
                seconds.add_metric([namespace, cluster, state.phase], progress.seconds_in_phase(state, at))
                failures.add_metric([namespace, cluster], state.failures)
        clusters.add_metric([], count)
        yield from (clusters, rolling, seconds, failures)


def registry(collector: RolloutCollector) -> CollectorRegistry:
    found = CollectorRegistry(auto_describe=False)
    found.register(collector)
    return found


def serve(address: str, collector: RolloutCollector) -> WSGIServer:
    """/metrics on ``address`` (host:port) from a thread of prometheus_client's; the server
    (``shutdown()`` stops it)."""
    host, port = split_listen_address(address)
    server, _thread = start_http_server(port, addr=host, registry=registry(collector))
    return server
