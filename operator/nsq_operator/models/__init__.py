"""Pydantic models of the CRDs; the CRD YAML in crds/ is generated from them."""
from .cluster import (ComponentStatus, LookupdSpec, MetricsSpec, NsqCluster, NsqClusterSpec, NsqClusterStatus,
                      NsqdSpec, NsqdStatus, ReplicationSpec, RolloutStatus, SchedulingSpec, StorageSpec)
from .common import Condition, CrdModel, ResourceRequirements, StatusBase
from .options import LookupdTunables, NsqdTunables
from .replication import OwnerCopies, ReplicationStatus
from .topology import NodeCounts, NsqChannelSpec, NsqTopicSpec, TopologyStatus

__all__ = [
    "ComponentStatus", "Condition", "CrdModel", "LookupdSpec", "LookupdTunables", "MetricsSpec", "NodeCounts",
    "NsqChannelSpec", "NsqCluster", "NsqClusterSpec", "NsqClusterStatus", "NsqTopicSpec", "NsqdSpec",
    "NsqdStatus", "NsqdTunables", "OwnerCopies", "ReplicationSpec", "ReplicationStatus", "ResourceRequirements", "RolloutStatus", "SchedulingSpec", "StatusBase", "StorageSpec",
    "TopologyStatus",
]
