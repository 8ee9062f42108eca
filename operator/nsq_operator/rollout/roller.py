"""The roller's pass: carry the phase recorded in status.rollout one step further, or,
once it is over, start on the next pod the plan picks. Every step can be taken again
(a drain is started only when none runs), so a pass cut short by a restart of the
operator is simply repeated by the next operator."""
from __future__ import annotations

from typing import Any

from ..builders import labels
from ..constants import NSQD_CLAIM_TEMPLATE
from ..kube.client import CONFLICT, INVALID, JSON_PATCH, KubeApiError
from ..kube.events import post_event
from ..kube.pods import is_serving, ordinal_of, replication_on_of
from ..models import NsqCluster, RolloutStatus
from ..reconcile.cluster import registered_everywhere
from ..reconcile import membership as peer_lists
from ..reconcile.replication import read_replication
from ..runtime import Runtime
from ..status import replication as replica_judge
from . import progress
from .drain import DrainClient, DrainState, NoAnswer, http_address
from .observe import Observed, PodView, observe
from .plan import SCALE_DOWN, STUCK_POD, Idle, Refuse, Restart, ScaleDown, Wait, has_work, plan


DRAINED = "Drained"
DRAIN_CUT_SHORT = "DrainCutShort"


def drain_outcome(pod: PodView, drain: "DrainState | None | NoAnswer") -> str | None:
    """How a drain ended, in the words status and events use; None while it may still run.
    Only a drain nsqd reported finished, or an nsqd that exited 0 (it does so only once its
    drain is over), is called drained."""
    if isinstance(drain, DrainState) and drain.finished:
        return "drained"
    if isinstance(drain, DrainState) and drain.draining:
        return None
    if isinstance(drain, NoAnswer) and not pod.crashed:
        return None  # slow or partitioned: it may still be draining, up to the deadline
    if pod.exit_code == 0:
        return "drained"
    if pod.exit_code is not None:
        return f"stopped before its drain finished (nsqd exited with {pod.exit_code})"
    if isinstance(drain, DrainState):  # answers, not draining, no exit seen: restarted by someone
        return "no longer draining (its nsqd was restarted)"
    if pod.crashed:
        return f"stopped before its drain finished ({pod.crashed})"
    return None  # nothing listens: the kubelet has yet to say how the container ended


class StopRoll(Exception):
    """The roll cannot go on by itself: Degraded, retried with backoff."""


class Blocked(Exception):
    def __init__(self, message: str, delay: float) -> None:
        super().__init__(message)
        self.delay = delay


class Roller:
    def __init__(self, rt: Runtime, cluster: NsqCluster, body: dict[str, Any], observed: Observed) -> None:
        self.rt, self.cluster, self.body, self.observed = rt, cluster, body, observed

    # -- effects ------------------------------------------------------------------------
    async def drain_client(self, pod: str) -> DrainClient:
        seen = self.observed.nsqd.pod(pod)
        return DrainClient(await self.rt.nsqd_admin(self.cluster.ref, pod, seen.tls_secret if seen else None))

    async def delete_pod(self, pod: str) -> None:
        """For a pod that serves nothing (its container cannot run): no budget to ask."""
        await self.rt.kube.delete("Pod", self.cluster.namespace, pod)

    async def evict_pod(self, pod: str) -> str | None:
        """Through the eviction API, so the PodDisruptionBudget counts a `kubectl drain` running
        at the same time; None once it goes, else why it may not go yet."""
        return await self.rt.kube.evict(self.cluster.namespace, pod)

    def event(self, reason: str, message: str, warning: bool = False) -> None:
        post_event(self.body, "Warning" if warning else "Normal", reason, message)

    async def save(self, state: RolloutStatus) -> None:
        await self.rt.kube.patch("NsqCluster", self.cluster.namespace, self.cluster.name,
                                 {"status": {"rollout": state.model_dump(by_alias=True, mode="json")}}, "status")

    async def registered(self) -> bool:
        pods = await self.rt.pods(self.cluster.namespace, labels.selector(self.cluster, labels.LOOKUPD))
        nsqds = [p.name for p in self.observed.nsqd.pods if p.ready]
        return await registered_everywhere(self.rt, self.cluster, pods, nsqds)

    async def copies_in_place(self) -> str | None:
        """With replicated topics, why taking an nsqd down now would take a second copy of
        some messages down (a peer not answering, not heard from, a copy missing or still
        catching up); None when every copy is in place, or when the nsqds do not all run
        with replication yet (a roll turning it on or off: there are no full copies to wait
        for until it is over)."""
        nsqd = self.observed.nsqd
        pods = await self.rt.pods(self.cluster.namespace, labels.selector(self.cluster, labels.NSQD))
        expected = [nsqd.pod_name(i) for i in range(nsqd.replicas)]
        present = {p["metadata"]["name"]: p for p in pods}
        if not any(replication_on_of(p) for p in pods):
            return None  # replication is off
        if absent := [n for n in expected if n not in present]:
            return f"{', '.join(absent)} does not exist"
        if not all(replication_on_of(present[n]) for n in expected):
            return None  # replication is being turned on or off: no full set of copies to wait for
        replication = await read_replication(self.rt, self.cluster.ref, [present[n] for n in expected], expected)
        if replication is None:
            return None
        return replica_judge.all_in_place(replication.status(expected), replication.reports, replication.pod_of)

    async def peer_list_settled(self) -> str | None:
        """With replicated topics, why the leaving nsqd cannot be taken out yet: some nsqd
        does not run the list without it, or still has copies to move off it (a copy on
        the leaving nsqd and one on a lost nsqd would be two down at once); None when none."""
        if self.cluster.spec.nsqd.replicated is None:
            return None
        pods = await self.rt.pods(self.cluster.namespace, labels.selector(self.cluster, labels.NSQD))
        replicated = [p for p in pods if replication_on_of(p) and is_serving(p)]
        replication = await read_replication(self.rt, self.cluster.ref, replicated)
        if replication is None:
            return None
        return peer_lists.unsettled(replication.reports, self.observed.wanted_nsqd)

    # -- phases -------------------------------------------------------------------------
    async def step(self, state: RolloutStatus, retargeted: bool) -> RolloutStatus:
        """Carry the current phase on; once it is over, take the plan's next step."""
        phases = {"Draining": self._draining, "Replacing": self._replacing, "HandingOff": self._handing_off,
                  "Removing": self._removing}
        if state.phase in phases:
            state, over = await phases[state.phase](state, retargeted)
            if not over:
                return state
        return await self._next(state)

    async def _draining(self, state: RolloutStatus, retargeted: bool) -> tuple[RolloutStatus, bool]:
        nsqd = self.observed.nsqd
        pod = nsqd.pod(state.pod)
        if pod is None or pod.terminating or not nsqd.outdated(pod):
            return progress.enter(state, "Replacing", f"waiting for the replacement of {state.pod}"), False
        drain: DrainState | None | NoAnswer
        try:
            drain = await (await self.drain_client(pod.name)).state()
        except NoAnswer as e:
            drain = e
        # A draining nsqd is not Ready by design: it is judged by its drain (its timeout plus
        # the margin), never by how long it has been unready.
        if (outcome := drain_outcome(pod, drain)) is not None:
            if (refused := await self.evict_pod(pod.name)) is not None:
                return state.model_copy(update={"message": f"{pod.name} {outcome}; its eviction waits for the "
                                                           f"disruption budget: {refused}"}), False
            cut_short = outcome != "drained"
            self.event(DRAIN_CUT_SHORT if cut_short else DRAINED, f"{pod.name} {outcome} and deleted",
                             warning=cut_short)
            return progress.enter(state, "Replacing", f"{pod.name} {outcome} and deleted; waiting for its "
                                                      f"replacement"), False
        limit = self.cluster.spec.drain_timeout_seconds + self.rt.intervals.drain_margin
        if drain is None and progress.seconds_in_phase(state) > limit:  # gone, and no kubelet says how (node lost?)
            await self.delete_pod(pod.name)
            message = f"{pod.name} stopped answering and its drain was never seen to finish; deleted"
            self.event(DRAIN_CUT_SHORT, message, warning=True)
            return progress.enter(state, "Replacing", f"{message}; waiting for its replacement"), False
        doing = (f"{drain.in_flight} messages in flight" if isinstance(drain, DrainState)
                 else f"no answer ({drain or 'nothing listens'})")
        if progress.seconds_in_phase(state) > limit:
            raise StopRoll(f"the drain of {pod.name} has not finished {int(progress.seconds_in_phase(state))}s "
                           f"after it began ({doing})")
        return state.model_copy(update={"message": f"draining {pod.name}: {doing}"}), False

    async def _replacing(self, state: RolloutStatus, retargeted: bool) -> tuple[RolloutStatus, bool]:
        if retargeted:
            return state, True  # the revision moved on while this pod came back: plan again
        component = self.observed.component(state.component)
        pod = component.pod(state.pod)
        if pod is not None and not pod.terminating and not component.outdated(pod) and pod.ready:
            if not await self.registered():
                message = f"waiting for {pod.name} to be registered in every nsqlookupd"
            elif component.component == labels.NSQD and (unsettled := await self.copies_in_place()) is not None:
                # replicated topics: the next nsqd goes down only once this one's peers hear
                # from it again and every copy it holds or owns is caught up
                message = f"waiting for the copies of replicated topics to be in place: {unsettled}"
            else:
                return state.model_copy(update={"replaced": [*state.replaced, pod.name], "error": None}), True
        else:
            message = f"waiting for the replacement of {state.pod} to be Ready"
        if progress.seconds_in_phase(state) > self.rt.intervals.ready_timeout:
            if message.startswith("waiting for the copies"):
                raise StopRoll(f"{state.pod} is Ready but its copies are not all in place "
                               f"{int(progress.seconds_in_phase(state))}s after it was replaced: {message}")
            detail = f" ({pod.stuck})" if pod is not None and pod.stuck else ""
            raise StopRoll(f"{state.pod} is not Ready and registered {int(progress.seconds_in_phase(state))}s "
                           f"after it was replaced{detail}")
        return state.model_copy(update={"message": message}), False

    def _targets(self) -> list[str]:
        """The HTTP host:port of the nsqds that stay; https://host:port of those whose plain
        HTTP is closed (the leaving nsqd verifies them against its --tls-root-ca-file)."""
        targets = []
        for pod in (self.observed.nsqd.pod_name(i) for i in range(self.observed.wanted_nsqd)):
            seen = self.observed.nsqd.pod(pod)
            if seen is not None and seen.tls_secret:
                targets.append(self.rt.endpoints.nsqd_https(self.cluster.ref, pod).rstrip("/"))
            else:
                targets.append(http_address(self.rt.endpoints.nsqd_http(self.cluster.ref, pod)))
        return targets

    async def _handing_off(self, state: RolloutStatus, retargeted: bool) -> tuple[RolloutStatus, bool]:
        nsqd = self.observed.nsqd
        pod = nsqd.pod(state.pod)
        if pod is None:
            return state, True
        if self.observed.wanted_nsqd > pod.ordinal:  # scaled back up meanwhile: bring it back into service
            if (refused := await self.evict_pod(pod.name)) is not None:
                return state.model_copy(update={"message": f"scale-down of {pod.name} called off; its restart "
                                                           f"waits for the disruption budget: {refused}"}), False
            self.event(SCALE_DOWN, f"scale-down of {pod.name} called off; restarting it to serve again")
            return progress.enter(state, "Replacing", f"waiting for {pod.name} to serve again"), False
        drain: DrainState | None | NoAnswer
        try:
            drain = await (await self.drain_client(pod.name)).state()
        except NoAnswer as e:
            drain = e  # keeps waiting, up to the deadline
        if drain is None:
            raise StopRoll(f"{pod.name} stopped before its messages were handed off; they stay on its claim "
                           f"and it is not removed")
        if isinstance(drain, DrainState):
            if drain.handoff is None:  # a plain drain (by hand?): turn it into a scale-down one
                await (await self.drain_client(pod.name)).hand_off(self._targets())
            elif drain.handoff.finished and drain.handoff.error:
                if state.error is not None:  # reported already: this pass is the retry after the backoff
                    await (await self.drain_client(pod.name)).hand_off(self._targets())
                raise StopRoll(f"scale-down of {pod.name} would strand {drain.handoff.messages_left} messages: "
                               f"{drain.handoff.error}")
            elif drain.handoff.finished:
                return await self._evict_leaving(state, pod)
        if progress.seconds_in_phase(state) > self.rt.intervals.handoff_timeout:
            raise StopRoll(f"the handoff of {pod.name}'s messages has not finished "
                           f"{int(progress.seconds_in_phase(state))}s after it began")
        return state.model_copy(update={"message": f"handing off the messages of {pod.name}"}), False

    async def _evict_leaving(self, state: RolloutStatus, pod: PodView) -> tuple[RolloutStatus, bool]:
        """The leaving nsqd handed everything off: it goes through the eviction API, so its
        disruption budget weighs it against a `kubectl drain` running at the same time (it
        waits while another nsqd is down), and only then do the StatefulSet's replicas come
        down, before its controller could make the evicted pod anew."""
        if (refused := await self.evict_pod(pod.name)) is not None:
            return state.model_copy(update={"message": f"{pod.name} handed all its messages off; its eviction waits "
                                                       f"for the disruption budget: {refused}"}), False
        self.event(SCALE_DOWN, f"{pod.name} handed all its messages off; evicted, and removed from "
                               f"{self.observed.nsqd.statefulset}")
        return await self._lower_replicas(progress.enter(state, "Removing", f"waiting for {pod.name} to terminate"),
                                          pod.ordinal)

    async def _lower_replicas(self, state: RolloutStatus, ordinal: int) -> tuple[RolloutStatus, bool]:
        """The nsqd StatefulSet's replicas down to ``ordinal``, on condition that they still
        are what they were read as (a JSON patch ``test``): a scale-up since then must not be
        undone. The condition is on the field, not on the object's resourceVersion, which
        the StatefulSet controller moves with every status write (each pod that changes)."""
        nsqd = self.observed.nsqd
        try:
            await self.rt.kube.patch("StatefulSet", self.cluster.namespace, nsqd.statefulset,
                                     [{"op": "test", "path": "/spec/replicas", "value": nsqd.replicas},
                                      {"op": "replace", "path": "/spec/replicas", "value": ordinal}],
                                     content_type=JSON_PATCH)
        except KubeApiError as e:
            if e.status not in (CONFLICT, INVALID):  # 422: the test failed, the replicas moved on
                raise
            return state.model_copy(update={"message": f"{nsqd.statefulset} changed; reading it again before "
                                                       f"lowering its replicas to {ordinal}"}), False
        return state, False

    async def _removing(self, state: RolloutStatus, retargeted: bool) -> tuple[RolloutStatus, bool]:
        """The leaving pod was evicted after its handoff: its place leaves the StatefulSet
        (once more, if that write did not go through), then the pod goes, then its claim as
        storage.whenScaled says."""
        nsqd = self.observed.nsqd
        if not state.pod:
            return state, True
        pod, ordinal = nsqd.pod(state.pod), ordinal_of(state.pod)
        if nsqd.replicas > ordinal:
            if self.observed.wanted_nsqd > ordinal:
                return state, True  # scaled back up meanwhile: the StatefulSet makes the pod anew
            if pod is not None and not pod.terminating and pod.created >= (state.since or ""):
                return state, True  # made anew before its place was removed: the plan hands it off again
            return await self._lower_replicas(state, ordinal)
        if pod is not None:
            return state.model_copy(update={"message": f"waiting for {pod.name} to terminate"}), False
        if self.cluster.spec.nsqd.storage.when_scaled == "Delete":
            await self.rt.kube.delete("PersistentVolumeClaim", self.cluster.namespace,
                                      f"{NSQD_CLAIM_TEMPLATE}-{state.pod}")
        return state, True

    async def _next(self, state: RolloutStatus) -> RolloutStatus:
        if not has_work(self.observed):
            step: Any = Idle(f"every pod runs revision {self.observed.target}")
        else:
            step = plan(self.observed, await self.registered())
        if isinstance(step, Idle):
            if state.phase == "Complete" and state.message == step.message and not state.error:
                return state
            return progress.enter(state, "Complete", step.message, pod=None, component=None, reason=None)
        if isinstance(step, Wait):
            if step.leaving is not None and await self._already_handing_off(step.leaving):
                return self._handoff_phase(state, step.leaving)
            return progress.waiting(state, step.message)
        if isinstance(step, Refuse):
            raise StopRoll(step.message)
        if isinstance(step, Restart):
            return await self._restart(state, step)
        assert isinstance(step, ScaleDown)
        if (moving := await self.peer_list_settled()) is not None:
            return progress.waiting(state, f"waiting for the nsqds to run the peer list without {step.pod} and "
                                           f"move their copies off it: {moving}")
        try:
            started = await (await self.drain_client(step.pod)).hand_off(self._targets())
        except NoAnswer as e:
            raise StopRoll(f"{step.pod} does not answer, its messages cannot be handed off: {e}") from None
        if started is None:
            raise StopRoll(f"{step.pod} does not answer, its messages cannot be handed off")
        self.event(SCALE_DOWN, f"scaling nsqd down: handing the messages of {step.pod} off to "
                                     f"{', '.join(step.recipients)} before removing it")
        return self._handoff_phase(state, step.pod)

    @staticmethod
    def _handoff_phase(state: RolloutStatus, pod: str) -> RolloutStatus:
        return progress.enter(state, "HandingOff", f"handing off the messages of {pod}", pod=pod,
                              component=labels.NSQD, reason=SCALE_DOWN)

    async def _already_handing_off(self, pod: str) -> bool:
        """The leaving nsqd is unready because its scale-down handoff began, by a pass whose
        phase was not recorded (the operator restarted in between, say): carry it on."""
        try:
            drain = await (await self.drain_client(pod)).state()
        except NoAnswer:
            return False
        return isinstance(drain, DrainState) and drain.handoff is not None

    async def _restart(self, state: RolloutStatus, step: Restart) -> RolloutStatus:
        fields = {"pod": step.pod, "component": step.component, "reason": step.reason}
        if step.component == labels.NSQD and step.reason != STUCK_POD \
                and (unsettled := await self.copies_in_place()) is not None:
            # never two copies down at once: a copy missing or catching up elsewhere waits
            return progress.waiting(state, f"waiting for the copies of replicated topics to be in place before "
                                           f"restarting {step.pod}: {unsettled}")
        if step.drain:
            try:
                started = await (await self.drain_client(step.pod)).start()
            except NoAnswer as e:
                raise StopRoll(f"{step.pod} does not answer, it cannot be drained: {e}") from None
            if started is not None:
                self.event(step.reason, f"restarting {step.pod} because {step.why}: draining it first")
                return progress.enter(state, "Draining", f"draining {step.pod}", **fields)
        if step.reason == STUCK_POD:
            await self.delete_pod(step.pod)
        elif (refused := await self.evict_pod(step.pod)) is not None:
            return progress.waiting(state, f"waiting for the disruption budget to allow restarting {step.pod}: "
                                           f"{refused}")
        self.event(step.reason, f"restarting {step.pod} because {step.why}")
        return progress.enter(state, "Replacing", f"waiting for the replacement of {step.pod}", **fields)


async def settled(rt: Runtime, cluster: NsqCluster, body: dict[str, Any]) -> bool:
    """Nothing to roll and nothing new to record, judged from the watch caches and kopf's
    copy of the object: an idle tick makes no request."""
    observed = await observe(rt, cluster, rt.intervals.ready_timeout)
    state = progress.current(body)
    return (not has_work(observed) and state is not None and state.phase == "Complete" and not state.error
            and state.target_revision == observed.target)


async def roll(rt: Runtime, cluster: NsqCluster, body: dict[str, Any]) -> RolloutStatus:
    """One pass; raises Blocked (with the delay before the next try) when the roll stops."""
    observed = await observe(rt, cluster, rt.intervals.ready_timeout)
    before = progress.current(body)
    state = before or RolloutStatus()
    retargeted = state.target_revision not in (None, observed.target)
    if state.target_revision != observed.target:
        state = state.model_copy(update={"target_revision": observed.target, "replaced": []})
    roller = Roller(rt, cluster, body, observed)
    try:
        after = await roller.step(state, retargeted)
    except StopRoll as e:
        after = progress.blocked(state, str(e))
        await roller.save(after)
        if state.error != after.error:
            roller.event(progress.BLOCKED_REASON, str(e), warning=True)
        raise Blocked(str(e), progress.backoff(after.failures, rt.intervals.retry, rt.intervals.max_backoff)) from None
    if after != before:
        await roller.save(after)
    return after
