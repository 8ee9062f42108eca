"""NsqCluster's ``spec.admin``: the nsqadmin web UI the operator runs beside the cluster."""
from __future__ import annotations

from typing import Literal

from pydantic import Field

from .common import CrdModel, ResourceRequirements


class AdminSpec(CrdModel):
    enabled: bool = Field(True, description="run nsqadmin, pointed at the cluster's lookupds; false scales it to zero")
    replicas: int = Field(1, ge=0, le=10, description="number of nsqadmin pods")
    resources: ResourceRequirements = Field(default_factory=ResourceRequirements, description="cpu and memory of each nsqadmin")
    service_type: Literal["ClusterIP", "NodePort", "LoadBalancer"] = Field(
        "ClusterIP", description="type of the nsqadmin Service: ClusterIP (reach it with kubectl port-forward), NodePort or LoadBalancer")
