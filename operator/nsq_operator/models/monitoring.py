"""NsqCluster's ``spec.metrics.prometheus``: how Prometheus finds the pods' ``/metrics``."""
from __future__ import annotations

from pydantic import Field

from .common import CrdModel, GoDuration


class PrometheusSpec(CrdModel):
    enabled: bool = Field(False, description="make nsqd's and nsqlookupd's /metrics scrapable: prometheus.io/* "
                                             "annotations on the pods and, where the monitoring.coreos.com CRDs "
                                             "exist, a PodMonitor")
    pod_monitor: bool = Field(True, description="make a PodMonitor when the Prometheus Operator's CRDs exist")
    interval: GoDuration = Field("30s", description="how often Prometheus scrapes each pod (the PodMonitor's interval)")
    labels: dict[str, str] = Field(default_factory=dict, description="labels on the PodMonitor, for the "
                                   "podMonitorSelector of your Prometheus (release: prometheus ...)")
