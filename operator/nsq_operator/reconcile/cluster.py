"""One pass over an NsqCluster: apply what the builders say, hand every nsqd the current
lookupd list, and report pods ready and registered."""
from __future__ import annotations

import copy
import datetime
from dataclasses import dataclass
from typing import Any, Iterable

from pydantic import ValidationError

from nsq_client.admin import LookupdAdmin

from ..builders import build_cluster, labels, names
from ..builders.limits import name_too_long
from ..builders.listeners import client_listeners
from ..constants import DEFAULT_IMAGE
from ..kube.apply import apply, immutable_changes
from ..kube.client import CONFLICT, KubeApiError
from ..kube.events import post_event
from ..kube.pods import (component_pods, is_ready, is_serving, ordinal, replication_on_of, tls_secret_of,
                         topology_ready)
from ..models import ComponentStatus, NsqCluster, NsqClusterStatus, NsqdStatus
from ..models.network import OperatorPod
from ..rollout import progress
from ..runtime import Runtime
from ..status import conditions
from ..status import replication as replica_judge
from ..status.errors import describe
from ..status.errors import BadSpec
from ..topology.wishes import ChannelWish, TopicWish
from .freshness import ensure_current
from . import health
from .gate import REACH_ERRORS, open_gate
from .health import Problem, creation_refused, pod_problems
from .storage import SIZE_FIELD, STORAGE_EXPANDED, STORAGE_RESIZE_FAILED, grow, storage_change
from . import tls as tls_look
from .optional import OPTIONAL_KINDS, prune_optional
from . import membership as peer_lists
from .replication import read_replication

NOT_APPLIED_REASON = "ChangeNotApplied"


@dataclass(frozen=True)
class ClusterPass:
    status: dict[str, Any]
    verdict: conditions.Verdict
    requeue: str | None = None  # what the pass waits for: the handler is to run again soon, not at its interval


def parse(body: Any, default_image: str = DEFAULT_IMAGE, operator_pod: OperatorPod | None = None) -> NsqCluster:
    """The cluster as the builders take it; BadSpec names what cannot be built (a field of
    the spec, or a name too long for the names made from it: an object stored before the
    CRD had that rule)."""
    if (too_long := name_too_long(str(body["metadata"]["name"]))) is not None:
        raise BadSpec(too_long)
    try:
        return NsqCluster.from_body(body, default_image, operator_pod)
    except ValidationError as e:
        raise BadSpec(describe(e)) from None


async def sync_lookupd_list(rt: Runtime, cluster: NsqCluster, nsqd_pods: list[dict[str, Any]]) -> list[str]:
    """Tell every answering nsqd the lookupds of the spec, live (no restart); returns the
    pods that could not be told."""
    wanted = [rt.endpoints.lookupd_tcp(cluster.ref, pod) for pod in names.lookupd_pods(cluster)]
    missed = []
    for pod in nsqd_pods:
        name = pod["metadata"]["name"]
        if not is_serving(pod):
            continue  # it reads the ConfigMap's list when it starts
        try:
            admin = await rt.nsqd_admin(cluster.ref, name, tls_secret_of(pod))
            if sorted(await admin.get_config("nsqlookupd_tcp_addresses") or []) != sorted(wanted):
                await admin.set_config("nsqlookupd_tcp_addresses", wanted)
        except REACH_ERRORS:
            missed.append(name)
    return missed


async def registered_everywhere(rt: Runtime, cluster: NsqCluster, lookupd_pods: list[dict[str, Any]],
                                nsqds: list[str]) -> bool:
    """Every listed nsqd is a producer in every lookupd of the spec. True for an empty list:
    the roller asks whether anyone is missing; the status asks registration()."""
    expected = {names.nsqd_broadcast_address(cluster, pod) for pod in nsqds}
    serving = [p for p in lookupd_pods if is_serving(p)]
    if len(serving) < cluster.spec.lookupd.replicas:
        return False
    for pod in serving:
        admin = LookupdAdmin(rt.endpoints.lookupd_http(cluster.ref, pod["metadata"]["name"]), session=rt.http)
        try:
            known = {p.get("broadcast_address") for p in await admin.nodes()}
        except REACH_ERRORS:
            return False
        if not expected <= known:
            return False
    return True


async def registration(rt: Runtime, cluster: NsqCluster, lookupd_pods: list[dict[str, Any]],
                       ready_nsqds: list[str]) -> bool | None:
    """What status.nsqd.registeredInAllLookupds says: None (left out) while no nsqd is ready,
    since nothing is registered then and "all registered" would claim what nobody checked."""
    if not ready_nsqds:
        return None
    return await registered_everywhere(rt, cluster, lookupd_pods, ready_nsqds)


def _registration_summary(registered: bool | None) -> str:
    if registered is None:
        return "no nsqd ready to register in nsqlookupd"
    return f"{'all' if registered else 'not all'} nsqds registered in every nsqlookupd"


async def open_gates(rt: Runtime, nsqd_pods: list[dict[str, Any]], topics: Iterable[TopicWish],
                     channels: Iterable[ChannelWish]) -> list[str]:
    """Prepare every answering nsqd whose readiness gate is still closed; returns the pods
    whose gate opened (the others stay not Ready and are tried again next pass)."""
    opened = []
    for pod in nsqd_pods:
        if is_serving(pod) and not topology_ready(pod):
            try:
                await open_gate(rt, pod, topics, channels)
            except REACH_ERRORS:
                continue
            opened.append(pod["metadata"]["name"])
    return opened


def hold_replicas(existing: dict[str, Any], manifest: dict[str, Any]) -> None:
    """Fewer nsqds is the roller's to carry out, one pod at a time after its messages are
    handed off: a pass only ever raises the StatefulSet's replicas. The write names the
    resourceVersion the replicas were read at, so a scale-down by the roller in between
    makes it fail (409) instead of being undone; the StatefulSet controller's status writes
    move that version too, so a 409 is followed by a fresh read and another try."""
    running = int(existing["spec"].get("replicas", 0))
    manifest["spec"]["replicas"] = max(running, manifest["spec"]["replicas"])
    manifest["metadata"]["resourceVersion"] = existing["metadata"].get("resourceVersion")


async def keep_running(rt: Runtime, cluster: NsqCluster, manifest: dict[str, Any]) -> None:
    """A StatefulSet made (anew) where nsqd pods run already, orphaned by a remake of the
    StatefulSet in the middle of a scale-down, keeps every one of them: the controller
    would delete at once a pod beyond the spec's replicas, whose messages the roller has
    yet to hand off. Pods on their way out are not kept."""
    statefulset = manifest["metadata"]["name"]
    ordinals = [ordinal(p) for p in await rt.pods(cluster.namespace, labels.selector(cluster, labels.NSQD))
                if not p["metadata"].get("deletionTimestamp")
                and p["metadata"]["name"].rsplit("-", 1)[0] == statefulset
                and p["metadata"]["name"].rsplit("-", 1)[-1].isdigit()]
    manifest["spec"]["replicas"] = max([manifest["spec"]["replicas"], *(o + 1 for o in ordinals)])


class Conflicted(Exception):
    """A write kept meeting a newer version of its object (409), read afresh each time: the
    pass did not happen and is to be tried again, never taken as done."""


CONFLICT_TRIES = 3
REMAKING = "StatefulSetRemade"


async def apply_all(rt: Runtime, cluster: NsqCluster, body: Any, hold_nsqd: bool = False,
                    live: Any = None) -> list[Problem]:
    """Apply every manifest; the writes the API server refuses, and the changes of the spec
    that cannot be applied, are returned as problems naming them (the others still go
    through), and so is what the pass waits for (``Problem.waiting``: a StatefulSet still
    being deleted). ``hold_nsqd``: leave nsqd's StatefulSet as it is (no certificate to run
    it with yet). Kinds of optional APIs this cluster does not serve are left out.
    ``live``: kopf's body, checked before each write (freshness). Raises Conflicted."""
    problems = []
    for manifest in build_cluster(cluster):
        ensure_current(live, body)
        meta = manifest["metadata"]
        nsqd = manifest["kind"] == "StatefulSet" and meta["name"] == names.nsqd_statefulset(cluster)
        if hold_nsqd and nsqd:
            continue
        if manifest["kind"] in OPTIONAL_KINDS and not await rt.discovery.serves(rt.kube, manifest["kind"]):
            continue
        try:
            if nsqd:
                problems += await _apply_nsqd(rt, cluster, body, manifest)
                continue
            existing = await rt.statefulset(meta["namespace"], meta["name"]) if manifest["kind"] == "StatefulSet" \
                else None
            applied = await apply(rt.kube, manifest, existing)
        except KubeApiError as e:
            if e.status == CONFLICT:
                raise Conflicted(f"{manifest['kind']} {meta['name']} changed while this pass wrote it: "
                                 f"{e.said}") from None
            if not e.refused:
                raise
            problems.append(Problem("WriteRefused", f"the API server refuses {manifest['kind']} {meta['name']}: "
                                                    f"{e.said}"))
            continue
        problems += _frozen(meta["name"], applied.not_applied)
    return problems


def _frozen(statefulset: str, not_applied: list[str]) -> list[Problem]:
    if not not_applied:
        return []
    return [Problem(NOT_APPLIED_REASON, f"StatefulSet {statefulset}: {', '.join(f'spec.{n}' for n in not_applied)} "
                                        f"cannot change once created, so this change of the spec is not applied")]


async def _apply_nsqd(rt: Runtime, cluster: NsqCluster, body: Any, manifest: dict[str, Any]) -> list[Problem]:
    """nsqd's StatefulSet: replicas held (hold_replicas, keep_running), a bigger disk carried
    out (_storage), a 409 tried again on a fresh read, up to CONFLICT_TRIES times."""
    meta = manifest["metadata"]
    existing = await rt.statefulset(meta["namespace"], meta["name"])  # the watch's copy: an idle pass asks nothing
    for attempt in range(CONFLICT_TRIES):
        if attempt:
            existing = await rt.kube.get("StatefulSet", meta["namespace"], meta["name"])
        if existing is not None and existing["metadata"].get("deletionTimestamp"):
            # deleted with its pods orphaned: the garbage collector has yet to release them
            # (an orphan finalizer); a write now would change a terminating object
            return [_remaking(meta["name"])]
        wanted = copy.deepcopy(manifest)
        if existing is None:
            await keep_running(rt, cluster, wanted)
        else:
            hold_replicas(existing, wanted)
        storage = await _storage(rt, cluster, body, existing, wanted)
        if storage.remade:
            return [_remaking(meta["name"])]
        try:
            applied = await apply(rt.kube, wanted, existing)
        except KubeApiError as e:
            if e.status == CONFLICT:
                continue
            raise
        # (a claim template refused above is named already, by the field of the spec)
        frozen = [n for n in applied.not_applied if not (n == "volumeClaimTemplates" and storage.problems)]
        return storage.problems + _frozen(meta["name"], frozen)
    raise Conflicted(f"StatefulSet {meta['name']} changed each of the {CONFLICT_TRIES} times this pass wrote it")


def _remaking(statefulset: str) -> Problem:
    return Problem(REMAKING, f"StatefulSet {statefulset} is being deleted, its pods kept, to be made anew with "
                             f"the new claim template", waiting=True)


@dataclass(frozen=True)
class StorageOutcome:
    problems: list[Problem]
    remade: bool = False  # the StatefulSet was deleted (its pods orphaned), to be made anew once gone


async def _storage(rt: Runtime, cluster: NsqCluster, body: Any, existing: dict[str, Any] | None,
                   manifest: dict[str, Any]) -> StorageOutcome:
    """A new size of nsqd's disks: grown (every claim expanded, then the StatefulSet deleted
    leaving its pods, to be made anew once the garbage collector has let it go) or refused,
    naming the field; a claim the apiserver will not expand (a StorageClass without
    allowVolumeExpansion: 403; an unbound claim: 422) is a problem with its words, and the
    StatefulSet stays as it is until the next pass tries again."""
    if existing is None or "volumeClaimTemplates" not in immutable_changes(existing, manifest):
        return StorageOutcome([])
    change = storage_change(existing, manifest)
    if change.refused:
        return StorageOutcome([Problem(NOT_APPLIED_REASON, change.refused)])
    if change.grow_to is None:
        return StorageOutcome([])
    grown = await grow(rt.kube, cluster, manifest["metadata"]["name"], change.grow_to)
    if grown.refused:
        return StorageOutcome([Problem(STORAGE_RESIZE_FAILED, f"{SIZE_FIELD} {change.grow_to}: the API server "
                                                              f"refuses to expand claim {claim}: {why}")
                               for claim, why in grown.refused])
    post_event(body, "Normal", STORAGE_EXPANDED,
               f"nsqd's disks grow to {change.grow_to}: claims {', '.join(grown.expanded) or '(none yet)'} expanded, "
               f"StatefulSet {manifest['metadata']['name']} made anew with its pods kept")
    return StorageOutcome([], remade=True)


async def problems_of(rt: Runtime, cluster: NsqCluster, body: Any, pods: list[dict[str, Any]]) -> list[Problem]:
    at = datetime.datetime.now(datetime.timezone.utc)
    state = progress.current(body)
    spared = state.pod if progress.active(state) and state is not None else None
    found = pod_problems(pods, at, rt.intervals.unschedulable_timeout, spared)
    present = {p["metadata"]["name"] for p in pods}
    if not found and not set(names.nsqd_pods(cluster) + names.lookupd_pods(cluster)) <= present:
        found = await creation_refused(rt.kube, cluster.namespace,
                                       [names.nsqd_statefulset(cluster), names.lookupd_statefulset(cluster)], at,
                                       rt.intervals.failed_create_window)
    return found


async def reconcile_cluster(rt: Runtime, body: Any, topics: Iterable[TopicWish] = (),
                            channels: Iterable[ChannelWish] = (), live: Any = None,
                            prune: bool = False) -> ClusterPass:
    """``body``: the snapshot the pass works on; ``live``: kopf's body, which moves on with
    the watch (the pass raises Superseded once it has; Conflicted when a write kept meeting
newer versions of its object). ``prune`` (after a change of the
    spec): delete the optional objects (Certificate, PodMonitor, NetworkPolicy) the spec no
    longer asks for."""
    cluster = parse(body, rt.default_image, rt.operator_pod)
    # with replicated topics, the nsqds' peer list follows the number of nsqds (reconcile.membership)
    peers = await peer_lists.peer_list(rt, cluster, await rt.statefulset(cluster.namespace,
                                                                        names.nsqd_statefulset(cluster)),
                                       await component_pods(rt, cluster.ref, labels.NSQD))
    cluster = peers.cluster
    certificate = await tls_look.look(rt, cluster)
    if certificate.revision is not None:
        cluster = cluster.model_copy(update={"tls_revision": certificate.revision})
    written = await apply_all(rt, cluster, body, hold_nsqd=certificate.revision is None, live=live)
    waiting = [p for p in written if p.waiting]
    refused = [p for p in written if not p.waiting]
    if certificate.problem is not None:
        refused.append(certificate.problem)
    if prune:
        ensure_current(live, body)
        await prune_optional(rt, cluster)
    nsqd_pods = await component_pods(rt, cluster.ref, labels.NSQD)
    if await open_gates(rt, nsqd_pods, list(topics), list(channels)):
        nsqd_pods = await component_pods(rt, cluster.ref, labels.NSQD)
    lookupd_pods = await component_pods(rt, cluster.ref, labels.LOOKUPD)
    missed = await sync_lookupd_list(rt, cluster, nsqd_pods)
    peers_missed = await peer_lists.sync_peer_list(rt, peers, nsqd_pods)
    ready_nsqds = [p["metadata"]["name"] for p in nsqd_pods if is_ready(p)]
    ready_lookupds = [p for p in lookupd_pods if is_ready(p)]
    registered = await registration(rt, cluster, lookupd_pods, ready_nsqds)
    replication = await read_replication(rt, cluster.ref, nsqd_pods, names.nsqd_pods(cluster))
    replication_status = None if replication is None else replication.status(names.nsqd_pods(cluster))
    status = NsqClusterStatus(
        observed_generation=cluster.generation or None,
        listeners=client_listeners(cluster),
        nsqd=NsqdStatus(replicas=len(nsqd_pods), ready_replicas=len(ready_nsqds),
                        selector=labels.selector_string(cluster, labels.NSQD), registered_in_all_lookupds=registered,
                        lookupd_addresses=names.lookupd_tcp_addresses(cluster), replication=replication_status),
        lookupd=ComponentStatus(replicas=len(lookupd_pods), ready_replicas=len(ready_lookupds),
                                selector=labels.selector_string(cluster, labels.LOOKUPD)),
    )
    want_nsqd, want_lookupd = cluster.spec.nsqd.replicas, cluster.spec.lookupd.replicas
    summary = (f"{len(ready_nsqds)}/{want_nsqd} nsqd ready, {len(ready_lookupds)}/{want_lookupd} nsqlookupd ready, "
               f"{_registration_summary(registered)}")
    if missed:
        summary += f"; lookupd list not yet delivered to {', '.join(missed)}"
    if certificate.waiting:
        summary += f"; {certificate.waiting}"
    for wait in waiting:
        summary += f"; {wait.message}"
    copies_unsettled = None if replication_status is None else replica_judge.unsettled(replication_status)
    if replication_status is not None:
        summary += (f"; copies of replicated topics: {replication_status.in_sync} in sync, "
                    f"{replication_status.catching_up} catching up, {replication_status.behind} behind, "
                    f"{replication_status.missing} missing")
    if peers_missed:
        summary += f"; {'; '.join(peers_missed)}"
    moving = None
    if replication is not None and cluster.spec.nsqd.replicated is not None:
        # (a pod not serving is waited for as not Ready)
        moving = peer_lists.unsettled({p["metadata"]["name"]: replication.reports.get(p["metadata"]["name"])
                                       for p in nsqd_pods if is_serving(p) and replication_on_of(p)}, want_nsqd)
    if moving:
        summary += f"; the peer list of {want_nsqd} nsqds (epoch {cluster.peer_epoch}) is not settled: {moving}"
    done = (len(ready_nsqds) == want_nsqd and len(nsqd_pods) == want_nsqd and len(ready_lookupds) == want_lookupd
            and len(lookupd_pods) == want_lookupd and (registered or want_nsqd == 0) and not missed
            and certificate.revision is not None and not waiting and not peers_missed and not moving)
    if done and copies_unsettled is not None:  # every pod is up, but not every copy is in place yet
        verdict = conditions.progressing("ReplicasNotInSync", f"{summary} ({copies_unsettled})")
    elif done:
        verdict = conditions.ready(summary)
    else:
        verdict = conditions.progressing(waiting[0].reason if waiting else "PodsNotReady", summary)
    verdict = health.verdict(refused + await problems_of(rt, cluster, body, nsqd_pods + lookupd_pods), verdict)
    ensure_current(live, body)  # a status of the spec before would be reported as the newer one's
    return ClusterPass(status.wire(), progress.verdict(progress.current(body), verdict),
                       requeue="; ".join(w.message for w in waiting) or None)
