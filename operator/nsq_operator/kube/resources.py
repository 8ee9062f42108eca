"""Where each kind the operator touches lives in the Kubernetes API."""
from __future__ import annotations

from dataclasses import dataclass

from ..constants import API_VERSION


@dataclass(frozen=True)
class Kind:
    api_version: str
    plural: str

    @property
    def prefix(self) -> str:
        return f"/api/{self.api_version}" if "/" not in self.api_version else f"/apis/{self.api_version}"

    def url(self, namespace: str, name: str | None = None, subresource: str | None = None) -> str:
        url = f"{self.prefix}/namespaces/{namespace}/{self.plural}"
        if name is not None:
            url += f"/{name}"
        if subresource is not None:
            url += f"/{subresource}"
        return url


KINDS: dict[str, Kind] = {
    "ConfigMap": Kind("v1", "configmaps"),
    "Service": Kind("v1", "services"),
    "ServiceAccount": Kind("v1", "serviceaccounts"),
    "Pod": Kind("v1", "pods"),
    "Event": Kind("v1", "events"),
    "PersistentVolumeClaim": Kind("v1", "persistentvolumeclaims"),
    "StatefulSet": Kind("apps/v1", "statefulsets"),
    "Deployment": Kind("apps/v1", "deployments"),
    "PodDisruptionBudget": Kind("policy/v1", "poddisruptionbudgets"),
    "Secret": Kind("v1", "secrets"),
    "NetworkPolicy": Kind("networking.k8s.io/v1", "networkpolicies"),
    # optional APIs: served only where cert-manager and the Prometheus Operator are installed
    "Certificate": Kind("cert-manager.io/v1", "certificates"),
    "PodMonitor": Kind("monitoring.coreos.com/v1", "podmonitors"),
    "NsqCluster": Kind(API_VERSION, "nsqclusters"),
    "NsqTopic": Kind(API_VERSION, "nsqtopics"),
    "NsqChannel": Kind(API_VERSION, "nsqchannels"),
}
