"""What the roller looks at, read once per pass: each component's StatefulSet (replicas,
the revision of its template) and its pods (revision, readiness, stuck or not)."""
from __future__ import annotations

import datetime
from dataclasses import dataclass
from typing import Any, Mapping, Protocol

from ..builders import labels, names
from ..builders.revision import Revision
from ..builders.statefulsets import build_lookupd_statefulset, build_nsqd_statefulset
from ..constants import TLS_REVISION_ANNOTATION
from ..kube.pods import PodSource, failing, is_ready, is_serving, ordinal, tls_secret_of
from ..models import NsqCluster

def stuck_reason(pod: Mapping[str, Any]) -> str | None:
    found = failing(pod)
    return found[0] if found else None


def last_exit_code(pod: Mapping[str, Any]) -> int | None:
    """The exit code of the container's last run, as the kubelet records it (state.terminated
    while it is down, lastState.terminated once it runs or waits again)."""
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        for field in ("state", "lastState"):
            terminated = (status.get(field) or {}).get("terminated")
            if terminated and terminated.get("exitCode") is not None:
                return int(terminated["exitCode"])
    return None


def _unready_for(pod: Mapping[str, Any], at: datetime.datetime) -> float:
    """Seconds since the pod last became not Ready (or was created)."""
    ready: Mapping[str, Any] = next(
        (c for c in (pod.get("status") or {}).get("conditions") or [] if c.get("type") == "Ready"), {})
    since = ready.get("lastTransitionTime") or pod["metadata"].get("creationTimestamp")
    if not since:
        return 0.0
    began = datetime.datetime.strptime(since, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.timezone.utc)
    return (at - began).total_seconds()


@dataclass(frozen=True)
class PodView:
    name: str
    ordinal: int
    revision: Revision | None
    ready: bool
    serving: bool
    terminating: bool
    crashed: str | None  # its container cannot run (CrashLoopBackOff ...): nothing to wait for
    exit_code: int | None  # of the container's last run, when it has stopped once
    stuck: str | None  # why the pod cannot get better by waiting (crashed, or not Ready for too long); None when it may
    tls_secret: str | None = None  # its nsqd is called over HTTPS, trusting this Secret's CA
    created: str = ""  # its creationTimestamp ("" when unknown)

    @classmethod
    def of(cls, pod: Mapping[str, Any], never_ready_after: float, at: datetime.datetime) -> "PodView":
        ready = is_ready(pod)
        crashed = stuck_reason(pod)
        stuck = crashed
        if stuck is None and not ready and _unready_for(pod, at) > never_ready_after:
            stuck = f"not Ready for {int(_unready_for(pod, at))}s"
        return cls(name=pod["metadata"]["name"], ordinal=ordinal(pod), revision=Revision.of(pod), ready=ready,
                   serving=is_serving(pod), terminating=bool(pod["metadata"].get("deletionTimestamp")),
                   crashed=crashed, exit_code=last_exit_code(pod), stuck=stuck, tls_secret=tls_secret_of(pod),
                   created=str(pod["metadata"].get("creationTimestamp") or ""))


@dataclass(frozen=True)
class ComponentView:
    component: str
    statefulset: str
    replicas: int  # the StatefulSet's, which may still be above the spec's during a scale-down
    resource_version: str | None  # the StatefulSet's, as read (status writes move it: the roller tests replicas instead)
    target: Revision | None  # the revision of the StatefulSet's pod template
    pods: list[PodView]

    def pod(self, name: str | None) -> PodView | None:
        return next((p for p in self.pods if p.name == name), None)

    def pod_name(self, ordinal_: int) -> str:
        return names.pod_name(self.statefulset, ordinal_)

    def outdated(self, pod: PodView) -> bool:
        return self.target is not None and pod.revision != self.target


@dataclass(frozen=True)
class Observed:
    lookupd: ComponentView
    nsqd: ComponentView
    wanted_nsqd: int
    applied: bool  # both StatefulSets carry the templates the spec asks for

    def component(self, name: str | None) -> ComponentView:
        return self.lookupd if name == labels.LOOKUPD else self.nsqd

    @property
    def target(self) -> str:
        """One name for what the whole cluster is rolled to."""
        parts = [c.target.combined if c.target else "-" for c in (self.lookupd, self.nsqd)]
        return "/".join(parts)


def _component(cluster: NsqCluster, component: str, statefulset: str, sts: Mapping[str, Any] | None,
               pods: list[dict[str, Any]], never_ready_after: float, at: datetime.datetime) -> ComponentView:
    selector = labels.selector(cluster, component)
    mine = [p for p in pods if all((p["metadata"].get("labels") or {}).get(k) == v for k, v in selector.items())]
    return ComponentView(
        component=component, statefulset=statefulset,
        replicas=int(sts["spec"].get("replicas", 0)) if sts else 0,
        resource_version=sts["metadata"].get("resourceVersion") if sts else None,
        target=Revision.of(sts["spec"]["template"]) if sts else None,
        pods=sorted((PodView.of(p, never_ready_after, at) for p in mine), key=lambda p: p.ordinal))


class ObjectSource(PodSource, Protocol):
    async def statefulset(self, namespace: str, name: str) -> dict[str, Any] | None: ...


async def observe(source: ObjectSource, cluster: NsqCluster, never_ready_after: float) -> Observed:
    at = datetime.datetime.now(datetime.timezone.utc)
    nsqd_name, lookupd_name = names.nsqd_statefulset(cluster), names.lookupd_statefulset(cluster)
    nsqd_sts = await source.statefulset(cluster.namespace, nsqd_name)
    lookupd_sts = await source.statefulset(cluster.namespace, lookupd_name)
    pods = await source.pods(cluster.namespace, {"app.kubernetes.io/instance": cluster.name,
                                                 "app.kubernetes.io/name": labels.NAME})
    # the TLS revision is the cluster pass's to set (it reads the Secret): taken as applied
    tls_revision = ((((nsqd_sts or {}).get("spec") or {}).get("template") or {}).get("metadata") or {}).get(
        "annotations", {}).get(TLS_REVISION_ANNOTATION, "")
    wanted_nsqd = Revision.of(build_nsqd_statefulset(cluster.model_copy(update={"tls_revision": tls_revision}))[
        "spec"]["template"])
    wanted_lookupd = Revision.of(build_lookupd_statefulset(cluster)["spec"]["template"])
    applied = (nsqd_sts is not None and lookupd_sts is not None
               and Revision.of(nsqd_sts["spec"]["template"]) == wanted_nsqd
               and Revision.of(lookupd_sts["spec"]["template"]) == wanted_lookupd)
    return Observed(
        lookupd=_component(cluster, labels.LOOKUPD, lookupd_name, lookupd_sts, pods, never_ready_after, at),
        nsqd=_component(cluster, labels.NSQD, nsqd_name, nsqd_sts, pods, never_ready_after, at),
        wanted_nsqd=cluster.spec.nsqd.replicas, applied=applied)
