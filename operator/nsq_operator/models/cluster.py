"""NsqCluster: a set of nsqlookupd and nsqd pods the operator runs and keeps in shape."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, ConfigDict, Field, model_validator

from nsq_protocol.host_port import OptionalDialAddress

from ..constants import DEFAULT_IMAGE, PAUSED_ANNOTATION, RESTART_ANNOTATION
from .admin import AdminSpec
from .common import CrdModel, GoDuration, Quantity, ResourceRequirements, StatusBase, duration_between, passthrough
from .monitoring import PrometheusSpec
from .network import NetworkPolicySpec, OperatorPod
from .options import LookupdTunables, NsqdTunables
from .replication import ReplicationStatus
from .security import AuthSpec, TlsSpec
from .template import PodTemplateOverride

ClaimPolicy = Literal["Retain", "Delete"]
NonZeroDuration = Annotated[GoDuration, AfterValidator(duration_between(low=1e-9))]


# checked by the apiserver on every update (a transition rule: it compares with the old object)
STORAGE_CLASS_IMMUTABLE = {
    "rule": "has(self.storageClassName) == has(oldSelf.storageClassName) && "
            "(!has(self.storageClassName) || self.storageClassName == oldSelf.storageClassName)",
    "message": "storageClassName cannot change: the claims of the existing nsqds keep their class",
}


class StorageSpec(CrdModel):
    model_config = ConfigDict(json_schema_extra={"x-kubernetes-validations": [STORAGE_CLASS_IMMUTABLE]})

    size: Quantity = Field("10Gi", description="size of each nsqd's PersistentVolumeClaim")
    storage_class_name: str | None = Field(None, description="StorageClass of the claims; the cluster default when unset")
    when_scaled: ClaimPolicy = Field("Retain", description="what happens to a pod's claim when nsqd is scaled down: Retain keeps its messages for a later scale-up, Delete removes them")
    when_deleted: ClaimPolicy = Field("Retain", description="what happens to the claims when the NsqCluster is deleted")


# checked by the apiserver on NsqdSpec: a message cannot have more copies than there are nsqds
REPLICAS_WITHIN_NSQDS = {
    "rule": "!has(self.replication) || self.replication.replicas <= 1 || self.replication.replicas <= self.replicas",
    "message": "replication.replicas cannot be above replicas: each copy of a message lives on a different nsqd",
}


class ReplicationSpec(CrdModel):
    """Replicated topics (nsqd's --topic-replicas): every message of a non-ephemeral topic
    is copied to the next nsqds of the StatefulSet's ordinal order and acknowledged once a
    majority of its copies holds it."""

    replicas: int = Field(1, ge=1, le=5, description="copies of each message of a non-ephemeral topic, on as many "
                                                     "nsqds (1: no replication; 2 or 3 in practice, at most 5 and at "
                                                     "most nsqd.replicas). While above 1 the number of nsqds is fixed: "
                                                     "a change of nsqd.replicas is refused until replication is "
                                                     "turned off")
    timeout: NonZeroDuration = Field("5s", description="a publish not acknowledged by a majority of the copies in "
                                                      "this long fails (nsqd's --replication-timeout)")
    failover_timeout: NonZeroDuration = Field(
        "3s", description="an nsqd its peers have not heard from this long is lost: its first live backup delivers "
                          "its messages (nsqd's --replication-failover-timeout)")
    per_topic: bool = Field(
        False, description="run the nsqds with their replication peers even when replicas is 1, so that an NsqTopic "
                           "may ask for copies of its own (its spec.replicas); with replicas above 1 they always do. "
                           "The number of nsqds is then fixed as with replicas above 1")

    @property
    def enabled(self) -> bool:
        """Whether the nsqds run with their peers (some topic may be replicated)."""
        return self.replicas > 1 or self.per_topic


class NsqdSpec(CrdModel):
    model_config = ConfigDict(json_schema_extra={"x-kubernetes-validations": [REPLICAS_WITHIN_NSQDS]})

    replicas: int = Field(3, ge=0, le=1000, description="number of nsqd pods")
    resources: ResourceRequirements = Field(default_factory=ResourceRequirements, description="cpu and memory of each nsqd")
    storage: StorageSpec = Field(default_factory=StorageSpec, description="each nsqd's persistent disk queue")
    durable: bool = Field(
        False, description="durable mode (nsqd's --sync-before-ack): a publish is answered only once its message is "
                           "fsynced, and a message stays on disk until a consumer FINs it (in flight and deferred too), "
                           "so every acknowledged message survives kill -9 and a node crash as long as the volume "
                           "does; topics and channels then keep no memory queue. Off: NSQ's behaviour, where messages "
                           "in memory (up to mem-queue-size), in flight or deferred can be lost with a crash; a drain "
                           "or SIGTERM still writes everything to disk")
    options: NsqdTunables = Field(default_factory=NsqdTunables, description="nsqd options by NSQ's flag names")
    pod_template: PodTemplateOverride = Field(default_factory=PodTemplateOverride,
                                              description="merged into the nsqd pods' template: labels, annotations, security context, extra containers and volumes")
    # off when left out (no default object: a stored cluster gains no field, and the rule
    # below reads no integer unless replication is asked for)
    replication: ReplicationSpec | None = Field(
        None, description="replicated topics: copies of every message on other nsqds, delivered by a backup when "
                          "its nsqd is lost; off when left out")

    @property
    def replicated(self) -> ReplicationSpec | None:
        """The replication asked for, None when off (left out, or 1 replica)."""
        return self.replication if self.replication is not None and self.replication.enabled else None

    @model_validator(mode="after")
    def _replicas_within_nsqds(self) -> "NsqdSpec":
        if self.replicated is not None and 1 < self.replicated.replicas > self.replicas:
            raise ValueError(REPLICAS_WITHIN_NSQDS["message"])
        return self


class LookupdSpec(CrdModel):
    replicas: int = Field(3, ge=1, le=15, description="number of nsqlookupd pods")
    resources: ResourceRequirements = Field(default_factory=ResourceRequirements, description="cpu and memory of each nsqlookupd")
    options: LookupdTunables = Field(default_factory=LookupdTunables, description="nsqlookupd options by NSQ's flag names")
    pod_template: PodTemplateOverride = Field(default_factory=PodTemplateOverride,
                                              description="merged into the nsqlookupd pods' template: labels, annotations, security context, extra containers and volumes")


class SchedulingSpec(CrdModel):
    affinity: dict[str, Any] | None = Field(None, json_schema_extra=passthrough("a core/v1 Affinity for every pod"))
    tolerations: list[dict[str, Any]] = Field(
        default_factory=list,
        json_schema_extra={"items": passthrough("a core/v1 Toleration"), "description": "core/v1 Tolerations for every pod"})
    topology_spread_constraints: list[dict[str, Any]] = Field(
        default_factory=list,
        json_schema_extra={"items": passthrough("a core/v1 TopologySpreadConstraint"),
                           "description": "core/v1 TopologySpreadConstraints; an empty labelSelector selects the component's own pods"})
    node_selector: dict[str, str] = Field(default_factory=dict, description="node labels every pod requires")
    priority_class_name: str | None = Field(None, description="PriorityClass of every pod")


class MetricsSpec(CrdModel):
    prometheus: PrometheusSpec = Field(default_factory=PrometheusSpec, description="scraping of /metrics by Prometheus")
    enabled: bool = Field(False, description="push nsqd's statistics to statsd")
    # checked as nsqd reads it (host:port), by the operator rather than the schema: a CRD
    # pattern would refuse objects an earlier release stored
    statsd_address: OptionalDialAddress = Field("", description="UDP <host>:<port> of the statsd daemon; required when enabled")
    statsd_prefix: str = Field("nsq.%s", description="prefix of the keys sent to statsd (%s becomes the host)")
    statsd_interval: NonZeroDuration = Field("60s", description="time between pushes to statsd, above 0")

    @model_validator(mode="after")
    def _address_when_enabled(self) -> "MetricsSpec":
        if self.enabled and not self.statsd_address:
            raise ValueError("statsdAddress is required when metrics are enabled")
        return self


class NsqClusterSpec(CrdModel):
    image: str | None = Field(None, min_length=1, description="container image holding nsqd and nsqlookupd; unset: "
                              "the operator's default, the image of its own release (so an upgraded operator "
                              "rolls clusters that name none onto its release)")
    image_pull_policy: Literal["Always", "IfNotPresent", "Never"] = Field("IfNotPresent", description="Always, IfNotPresent or Never")
    image_pull_secrets: list[str] = Field(default_factory=list, description="names of Secrets to pull the image with")
    nsqd: NsqdSpec = Field(default_factory=NsqdSpec, description="the brokers")
    lookupd: LookupdSpec = Field(default_factory=LookupdSpec, description="the discovery service")
    scheduling: SchedulingSpec = Field(default_factory=SchedulingSpec, description="where pods may run")
    drain_timeout_seconds: int = Field(60, ge=0, le=86400, description="how long a draining nsqd waits for consumers to finish the messages in flight (nsqd's --drain-timeout); the pods' grace period is longer, so a plain SIGTERM drains too")
    metrics: MetricsSpec = Field(default_factory=MetricsSpec, description="statistics export")
    tls: TlsSpec | None = Field(None, description="TLS for nsqd's clients and HTTP API, from a Secret or a "
                                "cert-manager issuer; nsqlookupd has no TLS in NSQ")
    auth: AuthSpec | None = Field(None, description="NSQ authorization: nsqd asks these auth servers what each "
                                  "client's secret allows")
    network_policy: NetworkPolicySpec = Field(default_factory=NetworkPolicySpec,
                                              description="a NetworkPolicy limiting who reaches nsqd")
    admin: AdminSpec = Field(default_factory=AdminSpec, description="nsqadmin, the cluster's web UI")
    cluster_domain: str | None = Field(
        None, max_length=253, pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$",
        description="the Kubernetes cluster's DNS domain (cluster.local on most clusters): when set, nsqd and "
                    "nsqlookupd advertise fully qualified names ending in it; when unset, names ending in .svc "
                    "that pods complete through their DNS search path")


class ComponentStatus(CrdModel):
    replicas: int = Field(0, description="pods that exist")
    ready_replicas: int = Field(0, description="pods that are ready")
    selector: str = Field("", description="label selector of the pods, for the scale subresource")


class NsqdStatus(ComponentStatus):
    registered_in_all_lookupds: bool | None = Field(
        None, description="true when every ready nsqd is known to every lookupd; false when one is missing from "
                          "a lookupd or a lookupd does not answer; left out while no nsqd is ready (nothing to register)")
    lookupd_addresses: list[str] = Field(default_factory=list, description="the lookupd TCP addresses nsqds were last given")
    replication: ReplicationStatus | None = Field(
        None, description="with replicated topics: where the copies of every nsqd's messages stand, read from "
                          "each nsqd's GET /replication; left out when replication is off")


RolloutPhase = Literal["Draining", "Replacing", "HandingOff", "Removing", "Waiting", "Complete"]


class RolloutStatus(CrdModel):
    """Where the rolling upgrade or scale-down stands: enough for a restarted operator to
    carry on with the same pod and phase."""
    phase: RolloutPhase = Field("Complete", description="Draining, Replacing, HandingOff, Removing, Waiting or Complete")
    pod: str | None = Field(None, description="the pod being worked on")
    component: str | None = Field(None, description="nsqd or nsqlookupd")
    reason: str | None = Field(None, description="NewRevision, ConfigChange, ManualRestart, StuckPod or ScaleDown")
    since: str | None = Field(None, description="when this phase began (RFC 3339)")
    target_revision: str | None = Field(None, description="the pod template revision being rolled out")
    replaced: list[str] = Field(default_factory=list, description="pods replaced so far towards the target revision, in order")
    message: str = Field("", description="what the roller does or waits for")
    error: str | None = Field(None, description="why the roll is stopped; it is retried with backoff")
    failures: int = Field(0, description="failed attempts in a row")


class Listener(CrdModel):
    """One address clients in the Kubernetes cluster connect to."""
    name: str = Field(description="nsqd-tcp, nsqd-http, nsqd-https, lookupd-http or nsqadmin-http")
    address: str = Field(description="host:port of the Service, by its DNS name")


class NsqClusterStatus(StatusBase):
    listeners: list[Listener] = Field(
        default_factory=list, description="where clients connect: nsqd's TCP port (publish, subscribe) and HTTP API "
                                          "through its client Service, nsqlookupd's HTTP API (discovery), nsqadmin")
    nsqd: NsqdStatus = Field(default_factory=NsqdStatus, description="the brokers")
    lookupd: ComponentStatus = Field(default_factory=ComponentStatus, description="the discovery service")
    rollout: RolloutStatus | None = Field(None, description="progress of the rolling upgrade or scale-down")


def is_paused(body: Any) -> bool:
    return str((body["metadata"].get("annotations") or {}).get(PAUSED_ANNOTATION, "")).lower() == "true"


@dataclass(frozen=True)
class ClusterRef:
    """Just enough of a cluster to name its objects and pods."""
    name: str
    namespace: str
    domain: str = ""  # the cluster DNS domain the pods' names end in ("" for <...>.svc)


class NsqCluster(CrdModel):
    """The object as the builders see it: identity plus a validated spec."""

    name: str
    namespace: str
    uid: str = ""
    generation: int = 0
    restart_token: str = ""  # the nsq.dev/restart annotation: a new value rolls every pod once
    tls_revision: str = ""  # a hash of the TLS Secret's data (reconcile.tls): a new one rolls every nsqd
    peer_epoch: int = 0  # the epoch of the nsqds' replication peer list (reconcile.membership)
    paused: bool = False  # nsq.dev/paused: "true"
    default_image: str = DEFAULT_IMAGE  # the operator's, for a spec that names none
    operator_pod: OperatorPod | None = None  # where the operator runs (None: not known, not in a pod)
    spec: NsqClusterSpec

    @classmethod
    def from_body(cls, body: Any, default_image: str = DEFAULT_IMAGE,
                  operator_pod: OperatorPod | None = None) -> "NsqCluster":
        meta = body["metadata"]
        annotations = meta.get("annotations") or {}
        return cls(name=meta["name"], namespace=meta.get("namespace") or "default", uid=meta.get("uid", ""),
                   generation=meta.get("generation", 0), restart_token=str(annotations.get(RESTART_ANNOTATION, "")),
                   paused=is_paused(body), default_image=default_image, operator_pod=operator_pod,
                   spec=NsqClusterSpec.model_validate(body.get("spec") or {}))

    @property
    def image(self) -> str:
        return self.spec.image or self.default_image

    @property
    def domain(self) -> str:
        return self.spec.cluster_domain or ""

    @property
    def ref(self) -> ClusterRef:
        return ClusterRef(self.name, self.namespace, self.domain)
