"""The nsqds' replication peer list as the number of nsqds changes.

Every nsqd runs with the same ordered peer list (--replication-peer), which names who
backs up whom and who adopts a lost nsqd's messages. The list is every ordinal of the
spec's replicas, with an epoch that goes up by one each time the list changes (read
from the StatefulSet's template, which carries both). It restarts no pod: running nsqds
are given a new list live (``PUT /replication/peers``), and each moves the copies its
new place in the ring gives it; pods made later start with it from the template.

So a scale-up makes the new pods and gives the list to the running ones; a scale-down
gives the list without the leaving pods first, and the roller takes a leaving pod out
(its handoff, then its removal) only once every nsqd runs that list and has moved its
copies off the leaving pods (``settled``): never two copies of a message down at once."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from nsq_client import AdminError

from ..builders import names
from ..kube.pods import is_serving, replication_epoch_of, replication_on_of, replication_peers_of, tls_secret_of
from ..models import NsqCluster
from ..runtime import Runtime
from .gate import REACH_ERRORS


@dataclass
class PeerList:
    """The spec's peer list as the nsqds are to run it, and what each runs now."""
    cluster: NsqCluster  # with the list's epoch (peer_epoch)
    peers: list[str] | None  # the list as the nsqds name each other (None: not known yet)
    running: dict[str, dict[str, Any]] = field(default_factory=dict)  # pod -> its GET /replication/peers
    problem: str | None = None


async def peer_list(rt: Runtime, cluster: NsqCluster, statefulset: Mapping[str, Any] | None,
                    nsqd_pods: Iterable[dict[str, Any]]) -> PeerList:
    """The epoch of the spec's list: the highest any nsqd or the StatefulSet's template
    runs the same list with, or one above the highest when that one is another list."""
    if cluster.spec.nsqd.replicated is None:
        return PeerList(cluster, None)
    template = ((statefulset or {}).get("spec") or {}).get("template") or {}
    seen = [(replication_epoch_of(template), replication_peers_of(template) == names.nsqd_replication_peers(cluster))]
    try:
        peers: list[str] | None = [rt.endpoints.nsqd_replication(cluster.ref, pod) for pod in names.nsqd_pods(cluster)]
    except REACH_ERRORS as e:  # (tests: a pod's address not known yet)
        peers, problem = None, f"peer list not given to the nsqds yet: {e}"
    else:
        problem = None
    running = {}
    for pod in nsqd_pods:
        if not is_serving(pod) or not replication_on_of(pod):
            continue
        try:
            admin = await rt.nsqd_admin(cluster.ref, pod["metadata"]["name"], tls_secret_of(pod))
            answer = await admin.replication_peers()
        except REACH_ERRORS:
            continue
        running[pod["metadata"]["name"]] = answer
        seen.append((int(answer.get("epoch") or 0), answer.get("peers") == peers))
    epoch = max(e for e, _ in seen)
    if any(e == epoch and not same for e, same in seen):
        epoch += 1
    return PeerList(cluster.model_copy(update={"peer_epoch": epoch}), peers, running, problem)


async def sync_peer_list(rt: Runtime, wanted: PeerList, nsqd_pods: Iterable[dict[str, Any]]) -> list[str]:
    """Give every answering nsqd that runs another list (or epoch) the spec's, live;
    returns why some could not be given it."""
    if wanted.peers is None:
        return [wanted.problem] if wanted.problem else []
    cluster, missed = wanted.cluster, []
    for pod in nsqd_pods:
        name = pod["metadata"]["name"]
        current = wanted.running.get(name)
        if current is None or (current.get("epoch"), current.get("peers")) == (cluster.peer_epoch, wanted.peers):
            continue  # not answering (it reads the template's list if made anew), or given it
        try:
            admin = await rt.nsqd_admin(cluster.ref, name, tls_secret_of(pod))
            await admin.set_replication_peers(wanted.peers, cluster.peer_epoch)
        except AdminError as e:
            missed.append(f"{name} refuses the peer list of epoch {cluster.peer_epoch}: {e}")
        except REACH_ERRORS:
            missed.append(f"{name} not given the peer list of epoch {cluster.peer_epoch} yet")
    return missed


def unsettled(reports: Mapping[str, Mapping[str, Any] | None], nsqds: int) -> str | None:
    """Why the nsqds' copies are not all on the ring of the list of ``nsqds`` peers yet,
    from their GET /replication (pod -> answer, None: no answer); None when they are."""
    waits = []
    epochs = set()
    for pod, report in sorted(reports.items()):
        if report is None:
            waits.append(f"{pod} does not answer")
            continue
        membership = report.get("membership") or {}
        epochs.add(membership.get("epoch"))
        if len(report.get("peers") or []) != nsqds:
            waits.append(f"{pod} runs a peer list of {len(report.get('peers') or [])} nsqds")
        elif membership.get("settled") != membership.get("epoch"):
            moving = ", ".join(membership.get("moving_topics") or []) or "its copies"
            waits.append(f"{pod} is moving {moving} to its new backups")
    if not waits and len(epochs) > 1:
        waits.append(f"the nsqds run peer lists of epochs {', '.join(str(e) for e in sorted(epochs))}")
    return "; ".join(waits) or None
