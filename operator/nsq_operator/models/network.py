"""NsqCluster's ``spec.networkPolicy``: who may open a connection to nsqd."""
from __future__ import annotations

from typing import Any

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
    operator_namespace: str = Field(
        "nsq-system", min_length=1, max_length=63, pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$",
        description="namespace of the operator, which calls nsqd's HTTP API (drains, topics, channels)")
    operator_labels: dict[str, str] = Field(
        default_factory=lambda: {"app.kubernetes.io/name": "nsq-operator"},
        description="labels of the operator's pod (the chart's app.kubernetes.io/name: nsq-operator)")
    allow_from: list[dict[str, Any]] = Field(
        default_factory=list,
        json_schema_extra={"items": passthrough("a networking/v1 NetworkPolicyPeer"),
                           "description": "more peers admitted to every nsqd port (Prometheus, say)"})
