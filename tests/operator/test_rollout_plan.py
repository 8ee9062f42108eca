"""The roller's pure decisions: which pod next and why, from pod template revisions,
readiness and replicas; what status.rollout means for the cluster's conditions."""
from __future__ import annotations

import datetime
from dataclasses import replace
from typing import Any

from nsq_operator.builders import build_cluster
from nsq_operator.builders.revision import Revision
from nsq_operator.builders.statefulsets import build_lookupd_statefulset, build_nsqd_statefulset
from nsq_operator.constants import NSQD_READINESS_PATH
from nsq_operator.endpoints import PodDnsEndpoints
from nsq_operator.models import NsqCluster, RolloutStatus
from nsq_operator.rollout import progress
from nsq_operator.rollout.drain import DrainState, http_address
from nsq_operator.rollout.observe import ComponentView, Observed, PodView, stuck_reason
from nsq_operator.rollout.roller import Roller
from nsq_operator.rollout.plan import Idle, Refuse, Restart, ScaleDown, Wait, has_work, plan, restart_reason
from nsq_operator.runtime import Runtime
from nsq_operator.status import conditions
from tests.operator.samples import cluster

OLD = Revision("img-a", "cfg-a", "rst-a")
NEW = Revision("img-b", "cfg-a", "rst-a")


def template_of(kind_name: str, **spec: Any) -> dict[str, Any]:
    sts = {(o["kind"], o["metadata"]["name"]): o for o in build_cluster(cluster(**spec))}
    return dict(sts["StatefulSet", kind_name]["spec"]["template"])


def pod(name: str, revision: Revision | None, ready: bool = True, stuck: str | None = None,
        terminating: bool = False) -> PodView:
    return PodView(name=name, ordinal=int(name.rsplit("-", 1)[1]), revision=revision, ready=ready,
                   serving=ready, terminating=terminating, crashed=None, exit_code=None, stuck=stuck)


def component(kind: str, replicas: int, target: Revision, pods: list[PodView]) -> ComponentView:
    return ComponentView(component=kind, statefulset=f"demo-{'nsqd' if kind == 'nsqd' else 'lookupd'}",
                         replicas=replicas, resource_version="1", target=target, pods=pods)


def observed(nsqd: list[PodView], lookupd: list[PodView] | None = None, nsqd_target: Revision = NEW,
             lookupd_target: Revision = NEW, replicas: int | None = None, wanted: int | None = None,
             applied: bool = True) -> Observed:
    lookupd = lookupd if lookupd is not None else [pod("demo-lookupd-0", lookupd_target)]
    count = len(nsqd) if replicas is None else replicas
    return Observed(lookupd=component("nsqlookupd", len(lookupd), lookupd_target, lookupd),
                    nsqd=component("nsqd", count, nsqd_target, nsqd),
                    wanted_nsqd=count if wanted is None else wanted, applied=applied)


# -- revisions -----------------------------------------------------------------------------
def test_each_kind_of_change_moves_its_own_part_of_the_revision() -> None:
    base = Revision.of(template_of("demo-nsqd"))
    image = Revision.of(template_of("demo-nsqd", image="nsq:2"))
    options = Revision.of(template_of("demo-nsqd", nsqd={"options": {"msg-timeout": "2m"}}))
    drain = Revision.of(template_of("demo-nsqd", drainTimeoutSeconds=5))
    scaled = Revision.of(template_of("demo-nsqd", nsqd={"replicas": 9}, lookupd={"replicas": 5}))
    assert base and image and options and drain and scaled
    assert image.image != base.image and image.config == base.config
    assert options.config != base.config and options.image == base.image
    assert drain.config != base.config  # the --drain-timeout flag and the grace period
    assert scaled == base  # replicas and the lookupd list never restart a pod
    assert restart_reason(base, image) == "NewRevision"
    assert restart_reason(base, options) == "ConfigChange"
    assert restart_reason(None, base) == "NewRevision"  # a pod from before revisions


def test_the_restart_annotation_moves_only_the_restart_part() -> None:
    body = {"apiVersion": "nsq.dev/v1alpha1", "kind": "NsqCluster",
            "metadata": {"name": "demo", "namespace": "ns1", "annotations": {"nsq.dev/restart": "monday"}}, "spec": {}}
    restarted = NsqCluster.from_body(body)
    for build in (build_nsqd_statefulset, build_lookupd_statefulset):
        before = Revision.of(build(cluster())["spec"]["template"])
        after = Revision.of(build(restarted)["spec"]["template"])
        assert before and after and (after.image, after.config) == (before.image, before.config)
        assert restart_reason(before, after) == "ManualRestart"


def test_nsqd_pods_drain_on_sigterm_within_their_grace_period() -> None:
    spec = template_of("demo-nsqd", drainTimeoutSeconds=45)["spec"]
    container = spec["containers"][0]
    assert "--drain-timeout=45s" in container["args"]
    assert spec["terminationGracePeriodSeconds"] > 45
    assert container["readinessProbe"]["httpGet"]["path"] == NSQD_READINESS_PATH == "/ready"
    assert container["livenessProbe"]["httpGet"]["path"] == "/ping"


# -- the plan ------------------------------------------------------------------------------
def test_nsqds_roll_highest_ordinal_first_after_lookupds() -> None:
    nsqds = [pod(f"demo-nsqd-{i}", OLD) for i in range(3)]
    step = plan(observed(nsqds, lookupd=[pod("demo-lookupd-0", OLD), pod("demo-lookupd-1", OLD)]), registered=True)
    assert step == Restart("nsqlookupd", "demo-lookupd-1", "NewRevision", drain=False, why="its image changed")
    step = plan(observed(nsqds), registered=True)
    assert isinstance(step, Restart) and (step.pod, step.drain, step.reason) == ("demo-nsqd-2", True, "NewRevision")
    nsqds[2] = pod("demo-nsqd-2", NEW)
    step = plan(observed(nsqds), registered=True)
    assert isinstance(step, Restart) and step.pod == "demo-nsqd-1"


def test_a_pod_is_restarted_only_while_the_others_are_ready_and_registered() -> None:
    nsqds = [pod("demo-nsqd-0", OLD), pod("demo-nsqd-1", NEW, ready=False), pod("demo-nsqd-2", NEW)]
    step = plan(observed(nsqds), registered=True)
    assert isinstance(step, Wait) and "demo-nsqd-1" in step.message and "demo-nsqd-0" in step.message
    step = plan(observed([pod("demo-nsqd-0", OLD), pod("demo-nsqd-2", NEW)], replicas=3), registered=True)
    assert isinstance(step, Wait) and "demo-nsqd-1" in step.message  # a missing pod counts as not Ready
    step = plan(observed([pod("demo-nsqd-0", OLD), pod("demo-nsqd-1", NEW)]), registered=False)
    assert isinstance(step, Wait) and "registered" in step.message
    assert isinstance(plan(observed([pod("demo-nsqd-0", OLD)], applied=False), registered=True), Wait)


def test_a_stuck_outdated_pod_goes_first_and_without_a_drain() -> None:
    nsqds = [pod("demo-nsqd-0", OLD, ready=False, stuck="CrashLoopBackOff"), pod("demo-nsqd-1", OLD)]
    step = plan(observed(nsqds), registered=False)
    assert isinstance(step, Restart) and (step.pod, step.reason, step.drain) == ("demo-nsqd-0", "StuckPod", False)
    # a stuck pod on the current revision is not restarted again: it would come back the same
    nsqds = [pod("demo-nsqd-0", NEW, ready=False, stuck="CrashLoopBackOff"), pod("demo-nsqd-1", OLD)]
    assert isinstance(plan(observed(nsqds), registered=True), Wait)


def test_stuck_is_read_from_waiting_containers() -> None:
    waiting = {"metadata": {"name": "p-0"}, "status": {"containerStatuses": [
        {"name": "nsqd", "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]}}
    running = {"metadata": {"name": "p-0"}, "status": {"containerStatuses": [{"name": "nsqd", "state": {"running": {}}}]}}
    assert stuck_reason(waiting) == "CrashLoopBackOff" and stuck_reason(running) is None
    old = {"metadata": {"name": "p-0", "creationTimestamp": "2020-01-01T00:00:00Z"}, "status": {}}
    assert "not Ready" in (PodView.of(old, 60, datetime.datetime.now(datetime.timezone.utc)).stuck or "")


def test_scale_down_hands_the_highest_ordinal_off_to_the_pods_that_stay() -> None:
    nsqds = [pod(f"demo-nsqd-{i}", OLD) for i in range(3)]
    step = plan(observed(nsqds, replicas=3, wanted=1), registered=True)
    assert step == ScaleDown("demo-nsqd-2", ["demo-nsqd-0"])  # before rolling what is leaving anyway
    nsqds[0] = pod("demo-nsqd-0", OLD, ready=False)
    assert isinstance(plan(observed(nsqds, replicas=3, wanted=1), registered=True), Wait)
    assert isinstance(plan(observed(nsqds, replicas=3, wanted=0), registered=True), Refuse)


def test_an_unready_leaving_nsqd_is_named_so_a_handoff_under_way_can_be_carried_on() -> None:
    nsqds = [pod("demo-nsqd-0", NEW), pod("demo-nsqd-1", NEW, ready=False)]  # unready: draining, maybe
    step = plan(observed(nsqds, replicas=2, wanted=1), registered=True)
    assert isinstance(step, Wait) and step.leaving == "demo-nsqd-1"
    gone = plan(observed(nsqds[:1], replicas=2, wanted=1), registered=True)
    assert isinstance(gone, Wait) and gone.leaving is None  # nothing there to ask


def test_idle_when_every_pod_runs_the_target() -> None:
    done = observed([pod("demo-nsqd-0", NEW), pod("demo-nsqd-1", NEW)])
    assert not has_work(done)
    assert isinstance(plan(done, registered=True), Idle)
    assert has_work(observed([pod("demo-nsqd-0", NEW)], replicas=2, wanted=1))


# -- progress and drain state ---------------------------------------------------------------
def test_a_stopped_roll_is_degraded_and_one_under_way_progressing() -> None:
    base = conditions.ready("all ready")
    assert progress.verdict(None, base) == base
    draining = progress.enter(RolloutStatus(), "Draining", "draining demo-nsqd-2", pod="demo-nsqd-2")
    assert progress.verdict(draining, base).progressing and "demo-nsqd-2" in progress.verdict(draining, base).message
    stopped = progress.blocked(draining, "the drain of demo-nsqd-2 has not finished")
    verdict = progress.verdict(stopped, base)
    assert verdict.degraded and verdict.reason == "RolloutBlocked" and "demo-nsqd-2" in verdict.message
    assert stopped.failures == 1 and progress.blocked(stopped, "again").failures == 2
    assert progress.enter(stopped, "Replacing", "next").failures == 0
    assert [progress.backoff(n, 0.5, 3) for n in (1, 2, 3, 4, 5)] == [0.5, 1.0, 2.0, 3.0, 3.0]
    assert progress.verdict(progress.enter(draining, "Complete", "done"), base) == base


def test_drain_state_is_read_from_nsqds_answer() -> None:
    state = DrainState.parse({"draining": True, "finished_at": None, "in_flight": 3,
                              "handoff": {"finished": True, "error": "no target took topic t", "messages_left": 12}})
    assert state.draining and not state.finished and state.in_flight == 3
    assert state.handoff is not None and state.handoff.error == "no target took topic t"
    assert state.handoff.messages_left == 12
    assert DrainState.parse({"draining": True, "handoff": None}).handoff is None
    assert DrainState.parse({"draining": True, "finished_at": 1.5}).finished
    assert http_address("http://10.0.0.1:4151/") == "10.0.0.1:4151"


def test_a_scale_down_hands_off_over_https_to_nsqds_whose_plain_http_is_closed() -> None:
    demo = cluster(nsqd={"replicas": 2})
    plain, https = pod("demo-nsqd-0", NEW), replace(pod("demo-nsqd-1", NEW), tls_secret="demo-nsqd-tls")
    seen = observed([plain, https, pod("demo-nsqd-2", NEW)])
    roller = Roller(Runtime(endpoints=PodDnsEndpoints()), demo, {}, replace(seen, wanted_nsqd=2))
    assert roller._targets() == ["demo-nsqd-0.demo-nsqd-headless.ns1.svc:4151",
                                 "https://demo-nsqd-1.demo-nsqd-headless.ns1.svc:4152"]
