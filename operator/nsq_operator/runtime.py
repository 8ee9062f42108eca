"""What every handler shares: how to reach pods, the Kubernetes connection, one HTTP
session for nsqd/nsqlookupd, and the intervals of the periodic checks."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import aiohttp
import kopf

from nsq_client.admin import NsqdAdmin

from .constants import DEFAULT_IMAGE, INSTANCE_LABEL
from .endpoints import Endpoints, PodDnsEndpoints
from .kube.client import KubeApi
from .kube.discovery import Discovery
from .models.cluster import ClusterRef
from .models.network import OperatorPod
from .tls_trust import TlsTrust


@dataclass(frozen=True)
class Intervals:
    cluster_status: float = 10.0  # cluster status, lookupd list and drift of owned objects
    topology: float = 10.0  # topic and channel drift on every nsqd
    retry: float = 5.0  # delay of TemporaryError retries
    http_timeout: float = 5.0
    rollout: float = 2.0  # between two steps of a rolling upgrade or scale-down
    drain_margin: float = 30.0  # a drain is stuck this long after its --drain-timeout
    ready_timeout: float = 300.0  # a replaced pod that is not Ready by then stops the roll
    handoff_timeout: float = 900.0  # a scale-down's handoff that has not finished by then stops it
    max_backoff: float = 300.0  # longest delay between retries of a stopped roll
    unschedulable_timeout: float = 300.0  # a pod no node takes for this long makes the cluster Degraded
    failed_create_window: float = 900.0  # a FailedCreate event this recent explains missing pods (Degraded)
    watch: int = 600  # the apiserver ends each watch after this long (its timeoutSeconds, whole seconds)


Credentials = Callable[..., "kopf.ConnectionInfo | None"]


def default_credentials(**kwargs: Any) -> kopf.ConnectionInfo | None:
    """In a pod, the service account (its token file read afresh each time: the kubelet
    rotates it); elsewhere, the kubeconfig."""
    return kopf.login_with_service_account(**kwargs) or kopf.login_with_kubeconfig(**kwargs)


@dataclass
class Runtime:
    endpoints: Endpoints = field(default_factory=PodDnsEndpoints)
    intervals: Intervals = field(default_factory=Intervals)
    default_image: str = DEFAULT_IMAGE  # what a cluster runs when its spec names no image
    operator_pod: OperatorPod | None = None  # the operator's own namespace and labels (NetworkPolicies admit it)
    credentials: Credentials = default_credentials
    connection: kopf.ConnectionInfo | None = None  # the latest login
    # kopf's indexes of the operator's pods and StatefulSets, fed by its watches (server-side
    # label selectors): reading from them costs no request; None outside kopf (then the API)
    pod_index: Any = None
    statefulset_index: Any = None
    rollout_index: Any = None  # kopf's index of the clusters' status.rollout, for the operator's /metrics
    cluster_index: Any = None  # kopf's index of the NsqClusters' DNS domains, by (namespace, name)
    discovery: Discovery = field(default_factory=Discovery)  # which optional APIs are served
    trust: TlsTrust = field(default_factory=TlsTrust)  # CAs of the nsqds served over HTTPS
    _login_kwargs: dict[str, Any] = field(default_factory=dict)
    _kube: KubeApi | None = None
    _http: aiohttp.ClientSession | None = None
    _closed: bool = False

    def log_in(self, **kwargs: Any) -> kopf.ConnectionInfo | None:
        """Log in anew (kopf asks at start and whenever the apiserver refused what it had);
        the operator's own client follows."""
        self._login_kwargs = kwargs
        info = self.credentials(**kwargs)
        if info is not None:
            self.connection = info
        return info

    def _current(self) -> kopf.ConnectionInfo:
        if self.connection is None:
            raise RuntimeError("not logged in to Kubernetes yet")
        return self.connection

    @property
    def kube(self) -> KubeApi:
        self._check_open()
        if self._kube is None:
            self._current()
            self._kube = KubeApi(self._current, relogin=lambda: self.log_in(**self._login_kwargs))
        return self._kube

    @property
    def http(self) -> aiohttp.ClientSession:
        self._check_open()
        if self._http is None or self._http.closed:
            self._http = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self.intervals.http_timeout))
        return self._http

    async def nsqd_admin(self, cluster: ClusterRef, pod: str, tls_secret: str | None = None) -> NsqdAdmin:
        """nsqd's HTTP API client for a pod: over HTTPS, trusting its Secret's CA, when the pod
        says it closed plain HTTP (``tls_secret``, from its annotations: :func:`kube.pods.tls_secret_of`)."""
        if not tls_secret:
            return NsqdAdmin(self.endpoints.nsqd_http(cluster, pod), session=self.http)
        context = await self.trust.context(self.kube, cluster.namespace, tls_secret)
        return NsqdAdmin(self.endpoints.nsqd_https(cluster, pod), session=self.http, ssl_context=context)

    async def pods(self, namespace: str, selector: Mapping[str, str]) -> list[dict[str, Any]]:
        """The pods carrying every label of ``selector`` (which names an instance)."""
        if self.pod_index is None:
            return await self.kube.list("Pod", namespace, dict(selector))
        held = self.pod_index.get((namespace, selector.get(INSTANCE_LABEL)), [])
        return [pod for pod in held if all((pod["metadata"].get("labels") or {}).get(k) == v for k, v in selector.items())]

    async def statefulset(self, namespace: str, name: str) -> dict[str, Any] | None:
        if self.statefulset_index is None:
            return await self.kube.get("StatefulSet", namespace, name)
        found = list(self.statefulset_index.get((namespace, name), []))
        return found[0] if found else None

    async def cluster_domain(self, namespace: str, name: str) -> str | None:
        """The DNS domain an NsqCluster's pods advertise ("" for the default); None when there
        is no such NsqCluster."""
        if self.cluster_index is None:
            found = await self.kube.get("NsqCluster", namespace, name)
            return None if found is None else cluster_domain_of(found)
        held = list(self.cluster_index.get((namespace, name), []))
        return str(held[0]) if held else None

    def _check_open(self) -> None:
        # a handler still running when the operator's cleanup closed the connections must
        # not open new ones: nothing would close them
        if self._closed:
            raise RuntimeError("the operator is stopping: its connections are closed")

    async def close(self) -> None:
        self._closed = True
        if self._kube is not None:
            await self._kube.close()
            self._kube = None
        if self._http is not None:
            await self._http.close()
            self._http = None


def runtime_of(memo: Any, handler_kwargs: Mapping[str, Any] | None = None) -> Runtime:
    """The Runtime; ``handler_kwargs`` (a handler's) hands it kopf's indexes once there."""
    rt = getattr(memo, "runtime", None)
    if not isinstance(rt, Runtime):
        raise RuntimeError("the operator was started without a Runtime in its memo")
    for attribute, index in (("pod_index", POD_INDEX), ("statefulset_index", STATEFULSET_INDEX),
                             ("rollout_index", ROLLOUT_INDEX), ("cluster_index", CLUSTER_INDEX)):
        if getattr(rt, attribute) is None and handler_kwargs and handler_kwargs.get(index) is not None:
            setattr(rt, attribute, handler_kwargs[index])
    return rt


def cluster_domain_of(body: Mapping[str, Any]) -> str:
    """spec.clusterDomain of an NsqCluster as stored ("" when left out)."""
    return str((body.get("spec") or {}).get("clusterDomain") or "")


POD_INDEX = "managed_pods"  # the kopf indexes' ids, and the handlers' keywords for them
STATEFULSET_INDEX = "managed_statefulsets"
ROLLOUT_INDEX = "rollouts"  # metrics.rollout_of
CLUSTER_INDEX = "cluster_domains"
