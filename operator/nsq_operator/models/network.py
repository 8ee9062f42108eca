"""NsqCluster's ``spec.networkPolicy``: who may open a connection to nsqd."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from pydantic import Field

from .common import CrdModel, passthrough


class NetworkPolicySpec(CrdModel):
    enabled: bool = Field(False, description="a NetworkPolicy admitting to nsqd's ports only the client pods "
                          "below, the cluster's own nsqd and nsqadmin pods, and the operator")
    client_labels: dict[str, str] = Field(
        default_factory=dict, description="labels a pod needs to reach nsqd (TCP, HTTP, HTTPS); empty: no "
                                          "client pod is admitted beyond allowFrom")
    client_namespaces: dict[str, Any] | None = Field(
        None, json_schema_extra=passthrough("a metav1 LabelSelector of the namespaces client pods may be in; "
                                            "unset: the cluster's own namespace"))
    operator_namespace: str | None = Field(
        None, min_length=1, max_length=63, pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$",
        description="namespace of another operator pod to admit (with operatorLabels); unset: only the operator "
                    "running this cluster, which is always admitted from the namespace and labels it runs with")
    operator_labels: dict[str, str] | None = Field(
        None, description="labels of another operator pod to admit (with operatorNamespace); unset: only the "
                          "operator running this cluster")
    allow_from: list[dict[str, Any]] = Field(
        default_factory=list,
        json_schema_extra={"items": passthrough("a networking/v1 NetworkPolicyPeer"),
                           "description": "more peers admitted to every nsqd port (TCP, HTTP, HTTPS)"})
    http_from: list[dict[str, Any]] = Field(
        default_factory=list,
        json_schema_extra={"items": passthrough("a networking/v1 NetworkPolicyPeer"),
                           "description": "peers admitted to nsqd's HTTP API only (HTTP and HTTPS ports): "
                                          "Prometheus scraping /metrics, KEDA's nsq scaler reading /stats"})


# what the operator's pod is known by when nothing says (an operator outside the cluster):
# the chart's defaults
FALLBACK_NAMESPACE = "nsq-system"
FALLBACK_LABELS = {"app.kubernetes.io/name": "nsq-operator"}
NAMESPACE_ENV = "POD_NAMESPACE"  # the chart's downward API
LABELS_ENV = "OPERATOR_POD_LABELS"  # "key=value,key=value": the labels its Deployment selects its pod by


def parse_labels(text: str) -> dict[str, str]:
    """``key=value,key=value`` (a label selector of equalities) as a dict."""
    out = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, sep, value = part.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"{part!r} is not key=value")
        out[key.strip()] = value.strip()
    return out


@dataclass(frozen=True)
class OperatorPod:
    """Where the operator itself runs, which every NetworkPolicy it makes must admit."""
    namespace: str
    labels: Mapping[str, str] = field(default_factory=dict)
