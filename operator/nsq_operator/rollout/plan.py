"""Which pod next, and why: a pure decision from what the roller observed.

Order: stuck outdated pods first (they cannot drain, and they hold the roll up), then
the nsqlookupds, then an nsqd scale-down, then the nsqds; highest ordinal first within
each. A pod is restarted only while every other pod of its component is Ready and every
nsqd is registered in every nsqlookupd, so at most one pod is ever down for the roll."""
from __future__ import annotations

from dataclasses import dataclass

from ..builders.revision import Revision
from .observe import ComponentView, Observed, PodView

NEW_REVISION = "NewRevision"
CONFIG_CHANGE = "ConfigChange"
MANUAL_RESTART = "ManualRestart"
STUCK_POD = "StuckPod"
SCALE_DOWN = "ScaleDown"


@dataclass(frozen=True)
class Idle:
    message: str


@dataclass(frozen=True)
class Wait:
    message: str
    # a scale-down's leaving nsqd that does not pass its readiness probe: it may be draining
    # already, handing its messages off (a phase the roller did not get to record)
    leaving: str | None = None


@dataclass(frozen=True)
class Refuse:
    """Something the roller will not do on its own (it would lose messages)."""
    message: str


@dataclass(frozen=True)
class Restart:
    component: str
    pod: str
    reason: str
    drain: bool
    why: str


@dataclass(frozen=True)
class ScaleDown:
    pod: str
    recipients: list[str]


Step = Idle | Wait | Refuse | Restart | ScaleDown


def restart_reason(have: Revision | None, want: Revision) -> str:
    if have is None or have.image != want.image:
        return NEW_REVISION
    if have.config != want.config:
        return CONFIG_CHANGE
    return MANUAL_RESTART


def _why(reason: str) -> str:
    return {NEW_REVISION: "its image changed", CONFIG_CHANGE: "its options changed",
            MANUAL_RESTART: "a restart was asked for (nsq.dev/restart)"}[reason]


def _stuck(component: ComponentView) -> Restart | None:
    stuck = [p for p in component.pods if p.stuck and not p.terminating and component.outdated(p)]
    if not stuck:
        return None
    pod = max(stuck, key=lambda p: p.ordinal)
    return Restart(component.component, pod.name, STUCK_POD, drain=False,
                   why=f"it is stuck ({pod.stuck}) on an outdated revision and cannot drain")


def _not_ready_besides(component: ComponentView, pod: str | None, upto: int) -> list[str]:
    """Pods of ordinals below ``upto``, other than ``pod``, that are missing or not Ready."""
    present = {p.ordinal: p for p in component.pods}
    return [component.pod_name(i) for i in range(upto)
            if component.pod_name(i) != pod and (i not in present or not present[i].ready or present[i].terminating)]


def _roll(component: ComponentView, registered: bool, drain: bool) -> Step | None:
    assert component.target is not None
    outdated = [p for p in component.pods if p.ordinal < component.replicas and component.outdated(p)]
    if not outdated:
        return None
    pod: PodView = max(outdated, key=lambda p: p.ordinal)
    if pod.terminating:
        return Wait(f"waiting for {pod.name} to terminate")
    unready = _not_ready_besides(component, pod.name, component.replicas)
    if unready:
        return Wait(f"waiting for {', '.join(unready)} to be Ready before restarting {pod.name}")
    if not registered:
        return Wait(f"waiting for every nsqd to be registered in every nsqlookupd before restarting {pod.name}")
    reason = restart_reason(pod.revision, component.target)
    return Restart(component.component, pod.name, reason, drain=drain, why=_why(reason))


def _scale_down(nsqd: ComponentView, wanted: int) -> Step:
    leaving = nsqd.pod(nsqd.pod_name(nsqd.replicas - 1))
    if wanted == 0:
        return Refuse("scaling nsqd to 0 would leave no nsqd to hand the messages off to")
    if leaving is None or not leaving.serving:
        name = nsqd.pod_name(nsqd.replicas - 1)
        return Wait(f"waiting for {name} to answer so that its messages can be handed off before it is removed",
                    leaving=None if leaving is None else name)
    unready = _not_ready_besides(nsqd, None, wanted)
    if unready:
        return Wait(f"waiting for {', '.join(unready)} to be Ready to take over the messages of {leaving.name}")
    return ScaleDown(leaving.name, [nsqd.pod_name(i) for i in range(wanted)])


def plan(observed: Observed, registered: bool) -> Step:
    """``registered``: every Ready nsqd is known to every nsqlookupd of the spec."""
    if not observed.applied:
        return Wait("waiting for the StatefulSets to carry the pod templates of the spec")
    for component in (observed.lookupd, observed.nsqd):
        if (stuck := _stuck(component)) is not None:
            return stuck
    if (step := _roll(observed.lookupd, registered, drain=False)) is not None:
        return step
    if observed.nsqd.replicas > observed.wanted_nsqd:
        return _scale_down(observed.nsqd, observed.wanted_nsqd)
    if (step := _roll(observed.nsqd, registered, drain=True)) is not None:
        return step
    return Idle(f"every pod runs revision {observed.target}")


def has_work(observed: Observed) -> bool:
    """Whether a plan could do anything: cheap, so idle passes make no call to any pod."""
    if not observed.applied or observed.nsqd.replicas > observed.wanted_nsqd:
        return True
    return any(c.outdated(p) for c in (observed.lookupd, observed.nsqd) for p in c.pods)
