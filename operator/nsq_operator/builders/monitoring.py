"""Prometheus' way to the pods' ``/metrics`` (spec.metrics.prometheus): the
``prometheus.io/*`` annotations most scrape configs follow, and a PodMonitor per component
for the Prometheus Operator. nsqd is scraped over HTTPS when its plain HTTP is closed."""
from __future__ import annotations

from typing import Any

from ..constants import LOOKUPD_HTTP_PORT, NSQD_HTTP_PORT, NSQD_HTTPS_PORT
from ..models import NsqCluster
from . import labels, names, tls
from .ownership import object_meta

METRICS_PATH = "/metrics"
MONITORING_API = "monitoring.coreos.com/v1"


def _https(cluster: NsqCluster, component: str) -> bool:
    return component == labels.NSQD and cluster.spec.tls is not None and cluster.spec.tls.https_only


def scrape_annotations(cluster: NsqCluster, component: str) -> dict[str, str]:
    if not cluster.spec.metrics.prometheus.enabled:
        return {}
    https = _https(cluster, component)
    port = (NSQD_HTTPS_PORT if https else NSQD_HTTP_PORT) if component == labels.NSQD else LOOKUPD_HTTP_PORT
    return {"prometheus.io/scrape": "true", "prometheus.io/path": METRICS_PATH, "prometheus.io/port": str(port),
            "prometheus.io/scheme": "https" if https else "http"}


def pod_monitor_name(cluster: NsqCluster, component: str) -> str:
    return f"{cluster.name}-{component}"


def _endpoint(cluster: NsqCluster, component: str) -> dict[str, Any]:
    prometheus = cluster.spec.metrics.prometheus
    endpoint: dict[str, Any] = {"port": "http", "path": METRICS_PATH, "interval": prometheus.interval,
                                "scheme": "http"}
    if _https(cluster, component):
        secret = str(tls.secret_name(cluster))
        endpoint.update(port="https", scheme="https", tlsConfig={
            "ca": {"secret": {"name": secret, "key": tls.CA_FILE}},
            # scraped by pod IP: the name checked is one the certificate carries
            "serverName": f"{names.nsqd_headless_service(cluster)}.{cluster.namespace}.svc"})
    return endpoint


def build_pod_monitors(cluster: NsqCluster) -> list[dict[str, Any]]:
    """One PodMonitor per component (they differ in port and scheme); none unless asked."""
    prometheus = cluster.spec.metrics.prometheus
    if not (prometheus.enabled and prometheus.pod_monitor):
        return []
    monitors = []
    for component in (labels.NSQD, labels.LOOKUPD):
        meta = object_meta(cluster, pod_monitor_name(cluster, component), component)
        meta["labels"] = {**prometheus.labels, **meta["labels"]}
        monitors.append({
            "apiVersion": MONITORING_API,
            "kind": "PodMonitor",
            "metadata": meta,
            "spec": {"selector": {"matchLabels": labels.selector(cluster, component)},
                     "podMetricsEndpoints": [_endpoint(cluster, component)]},
        })
    return monitors
