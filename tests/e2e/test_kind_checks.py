"""The functions of e2e/kind/checks.sh, sourced after lib.sh in bash as scenario.sh does,
against a stand-in kubectl that answers with a cluster's state: each check accepts a right
state and rejects a wrong one (non-zero exit, and for the ones that stop the scenario a
message saying what is wrong)."""
from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.kubectl_standin import StandInKubectl
from tests.e2e.test_kind_scripts import KIND

NAMESPACE = "nsq-e2e-test"
NEW, OLD = "nsq-operator:e2e-2", "nsq-operator:e2e-1"
NSQD = "app.kubernetes.io/instance=nsq,app.kubernetes.io/component=nsqd"
LOOKUPD = "app.kubernetes.io/instance=nsq,app.kubernetes.io/component=nsqlookupd"
# The jsonpath queries of checks.sh, as kubectl receives them.
READY = 'jsonpath={.status.conditions[?(@.type=="Ready")].status}'
GENERATION = "jsonpath={.metadata.generation}"
OBSERVED = "jsonpath={.status.observedGeneration}"
PHASE = "jsonpath={.status.rollout.phase}"
ROLLOUT = "jsonpath={.status.rollout.phase} {.status.rollout.reason} {.status.rollout.pod} {.status.rollout.message}"
POD_LISTING = (r'jsonpath={range .items[*]}{.metadata.name}{" "}{.spec.containers[0].image}{" "}'
               r'{.status.conditions[?(@.type=="Ready")].status}{" "}{.metadata.deletionTimestamp}{"\n"}{end}')
FIRST_POD = "jsonpath={.items[0].metadata.name}"
CREATED = "jsonpath={.metadata.creationTimestamp}"
SUCCEEDED, FAILED = "jsonpath={.status.succeeded}", "jsonpath={.status.failed}"
STOP = "open('/work/stop', 'w').close()"
RESULT = 'RESULT {"lost": 0, "published": 812}\n'

SOURCED = f'set -euo pipefail; source "{KIND}/lib.sh"; source "{KIND}/checks.sh"; '
# wait_until runs a check as an `until` condition, where set -e does not apply.
AS_CONDITION = SOURCED + '"$@" && exit 0 || exit $?'
AS_STEP = SOURCED + '"$@"'


@pytest.fixture
def kubectl(tmp_path: Path) -> Iterator[StandInKubectl]:
    directory = tmp_path / "bin"
    directory.mkdir()
    yield StandInKubectl(directory, NAMESPACE)


@pytest.fixture
def artifacts(tmp_path: Path) -> Path:
    folder = tmp_path / "artifacts"
    folder.mkdir()
    return folder


def run(kubectl: StandInKubectl, script: str, *args: str,
        artifacts: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {"SETTLE_TIMEOUT": "1", "ARTIFACTS_DIR": str(artifacts or kubectl.directory)}
    done = kubectl.run(script, *args, env=env)
    assert kubectl.unanswered() == [], f"checks.sh asked kubectl what the test did not expect: {done.stderr}"
    return done


def check(kubectl: StandInKubectl, *call: str) -> bool:
    done = run(kubectl, AS_CONDITION, *call)
    assert done.returncode in (0, 1), done.stderr
    return done.returncode == 0


def pod(name: str, image: str = NEW, ready: str = "True", deleting: str = "") -> str:
    return f"{name} {image} {ready} {deleting}\n"


def nsqds(*lines: str) -> str:
    return "".join(lines) or "".join(pod(f"nsq-nsqd-{i}") for i in range(3))


def cluster(kubectl: StandInKubectl, *, ready: str = "True", generation: str = "4", observed: str = "4",
            phase: str = "Complete", nsqd_pods: str = "", lookupd_pods: str = "") -> None:
    for query, value in ((READY, ready), (GENERATION, generation), (OBSERVED, observed), (PHASE, phase),
                         (ROLLOUT, f"{phase}   " if phase else "   ")):
        kubectl.answer_k("get", "nsqcluster", "nsq", "-o", query, stdout=value)
    kubectl.answer_k("get", "pods", "--selector", NSQD, "-o", POD_LISTING, stdout=nsqds(nsqd_pods))
    kubectl.answer_k("get", "pods", "--selector", LOOKUPD, "-o", POD_LISTING,
                     stdout=lookupd_pods or pod("nsq-nsqlookupd-0") + pod("nsq-nsqlookupd-1"))


# cluster_ready ------------------------------------------------------------------------

def test_cluster_ready_wants_ready_for_the_current_generation(kubectl: StandInKubectl) -> None:
    cluster(kubectl)
    assert check(kubectl, "cluster_ready")
    cluster(kubectl, observed="3")  # Ready, but for the spec before the patch
    assert not check(kubectl, "cluster_ready")
    cluster(kubectl, ready="False")
    assert not check(kubectl, "cluster_ready")


def test_cluster_ready_is_false_while_the_cluster_cannot_be_read(kubectl: StandInKubectl) -> None:
    for query in (READY, GENERATION, OBSERVED):
        kubectl.not_found("get", "nsqcluster", "nsq", "-o", query)
    assert not check(kubectl, "cluster_ready")


# pods_on --------------------------------------------------------------------------------

def test_pods_on_accepts_exactly_the_count_all_ready_on_the_image(kubectl: StandInKubectl) -> None:
    cluster(kubectl)
    assert check(kubectl, "pods_on", NSQD, NEW, "3")


@pytest.mark.parametrize("listing, count", [
    (pod("nsq-nsqd-0") + pod("nsq-nsqd-1") + pod("nsq-nsqd-2", image=OLD), "3"),
    (pod("nsq-nsqd-0") + pod("nsq-nsqd-1", ready="False") + pod("nsq-nsqd-2"), "3"),
    (pod("nsq-nsqd-0") + pod("nsq-nsqd-1", ready="") + pod("nsq-nsqd-2"), "3"),
    (pod("nsq-nsqd-0") + pod("nsq-nsqd-1") + pod("nsq-nsqd-2", deleting="2025-01-02T03:04:05Z"), "3"),
    (pod("nsq-nsqd-0") + pod("nsq-nsqd-1"), "3"),
    (pod("nsq-nsqd-0") + pod("nsq-nsqd-1") + pod("nsq-nsqd-2"), "2"),
], ids=["old-image", "not-ready", "no-ready-condition", "terminating", "too-few", "too-many"])
def test_pods_on_rejects_a_pod_off_the_image_unready_leaving_or_a_wrong_count(
        kubectl: StandInKubectl, listing: str, count: str) -> None:
    kubectl.answer_k("get", "pods", "--selector", NSQD, "-o", POD_LISTING, stdout=listing)
    assert not check(kubectl, "pods_on", NSQD, NEW, count)


# rollout_complete, show_rollout -------------------------------------------------------

@pytest.mark.parametrize("phase, complete", [("", True), ("Complete", True), ("Draining", False),
                                             ("Replacing", False), ("Blocked", False)])
def test_rollout_complete_only_without_a_roll_or_when_it_is_complete(
        kubectl: StandInKubectl, phase: str, complete: bool) -> None:
    kubectl.answer_k("get", "nsqcluster", "nsq", "-o", PHASE, stdout=phase)
    assert check(kubectl, "rollout_complete") is complete


def test_show_rollout_logs_the_rollout_each_time_it_changes(kubectl: StandInKubectl) -> None:
    kubectl.answer_in_turn(["--namespace", NAMESPACE, "get", "nsqcluster", "nsq", "-o", ROLLOUT], [
        "Draining NewRevision nsq-nsqd-2 drain started", "Draining NewRevision nsq-nsqd-2 drain started",
        "Replacing NewRevision nsq-nsqd-2 ", "   "])
    done = run(kubectl, SOURCED + "for _ in 1 2 3 4; do show_rollout; done")
    assert done.returncode == 0, done.stderr
    logged = [line.split(" ", 1)[1] for line in done.stderr.splitlines()]
    assert logged == ["status.rollout: Draining NewRevision nsq-nsqd-2 drain started",
                      "status.rollout: Replacing NewRevision nsq-nsqd-2 ",
                      "status.rollout: <none>"]


# cluster_settled_on ---------------------------------------------------------------------

def test_cluster_settled_on_accepts_a_ready_finished_cluster_on_the_image(kubectl: StandInKubectl) -> None:
    cluster(kubectl)
    assert check(kubectl, "cluster_settled_on", NEW, "3")


@pytest.mark.parametrize("state", [
    {"phase": "Draining"},
    {"observed": "3"},
    {"lookupd_pods": pod("nsq-nsqlookupd-0") + pod("nsq-nsqlookupd-1", image=OLD)},
    {"nsqd_pods": pod("nsq-nsqd-0") + pod("nsq-nsqd-1") + pod("nsq-nsqd-2", ready="False")},
], ids=["rolling", "stale-status", "lookupd-on-old-image", "nsqd-unready"])
def test_cluster_settled_on_rejects_a_cluster_still_moving(kubectl: StandInKubectl, state: dict[str, str]) -> None:
    cluster(kubectl, **state)
    assert not check(kubectl, "cluster_settled_on", NEW, "3")


def test_cluster_settled_on_counts_the_nsqds_it_is_told(kubectl: StandInKubectl) -> None:
    cluster(kubectl, nsqd_pods=pod("nsq-nsqd-0") + pod("nsq-nsqd-1"))
    assert check(kubectl, "cluster_settled_on", NEW, "2")
    assert not check(kubectl, "cluster_settled_on", NEW, "3")


# pod_gone, claim_gone -------------------------------------------------------------------

@pytest.mark.parametrize("function, kind", [("pod_gone", "pod"), ("claim_gone", "pvc")])
def test_gone_only_when_kubectl_cannot_find_it(kubectl: StandInKubectl, function: str, kind: str) -> None:
    kubectl.answer_k("get", kind, "data-nsq-nsqd-2", stdout="NAME STATUS\ndata-nsq-nsqd-2 Bound\n")
    assert not check(kubectl, function, "data-nsq-nsqd-2")
    kubectl.not_found("get", kind, "data-nsq-nsqd-2")
    assert check(kubectl, function, "data-nsq-nsqd-2")


# load_publishing, load_finished ---------------------------------------------------------

def load_pod(kubectl: StandInKubectl, name: str, pod_name: str) -> None:
    kubectl.answer_k("get", "pods", "--selector", f"app.kubernetes.io/instance={name}", "-o", FIRST_POD,
                     stdout=pod_name)


def test_load_publishing_once_its_log_says_so(kubectl: StandInKubectl) -> None:
    load_pod(kubectl, "load-x", "load-x-abcde")
    kubectl.answer_k("logs", "load-x-abcde", stdout="connecting\n")
    assert not check(kubectl, "load_publishing", "load-x")
    kubectl.answer_k("logs", "load-x-abcde", stdout="connecting\npublishing to ['orders', 'clicks']\n")
    assert check(kubectl, "load_publishing", "load-x")


def test_load_publishing_with_a_long_log(kubectl: StandInKubectl) -> None:
    """The line is found however much the load logged after it."""
    load_pod(kubectl, "load-x", "load-x-abcde")
    progress = "".join(f"published {i} acknowledged {i} delivered {i}\n" for i in range(40_000))
    kubectl.answer_k("logs", "load-x-abcde", stdout="publishing to ['orders']\n" + progress)
    assert check(kubectl, "load_publishing", "load-x")


def test_load_publishing_is_false_before_the_pod_exists(kubectl: StandInKubectl) -> None:
    load_pod(kubectl, "load-x", "")
    assert not check(kubectl, "load_publishing", "load-x")


@pytest.mark.parametrize("succeeded, failed, finished", [("", "", False), ("1", "", True), ("", "1", True)])
def test_load_finished_when_the_job_succeeded_or_failed(
        kubectl: StandInKubectl, succeeded: str, failed: str, finished: bool) -> None:
    kubectl.answer_k("get", "job", "load-x", "-o", SUCCEEDED, stdout=succeeded)
    kubectl.answer_k("get", "job", "load-x", "-o", FAILED, stdout=failed)
    assert check(kubectl, "load_finished", "load-x") is finished


# start_load, stop_load ------------------------------------------------------------------

def test_start_load_replaces_the_job_and_waits_until_it_publishes(kubectl: StandInKubectl) -> None:
    kubectl.answer_k("delete", "job", "load-up", "--ignore-not-found", "--wait")
    kubectl.answer("apply", "-f", "-", stdout="job.batch/load-up created\n")
    load_pod(kubectl, "load-up", "load-up-abcde")
    kubectl.answer_k("logs", "load-up-abcde", stdout="publishing to ['orders']\n")
    done = run(kubectl, AS_STEP, "start_load", "load-up")
    assert done.returncode == 0, done.stderr
    assert "load load-up publishing" in done.stderr
    calls = kubectl.calls()
    assert [c.args[2] if c.args[0] == "--namespace" else c.args[0] for c in calls[:2]] == ["delete", "apply"]
    job = calls[1].stdin
    assert job is not None and "kind: Job" in job and "name: load-up" in job and f"namespace: {NAMESPACE}" in job


def test_start_load_stops_the_scenario_when_the_job_is_refused(kubectl: StandInKubectl) -> None:
    kubectl.answer_k("delete", "job", "load-up", "--ignore-not-found", "--wait")
    kubectl.answer("apply", "-f", "-", status=1, stderr="error: jobs.batch is forbidden\n")
    done = run(kubectl, AS_STEP, "start_load", "load-up")
    assert done.returncode != 0
    assert "forbidden" in done.stderr and "publishing" not in done.stderr


def finished_load(kubectl: StandInKubectl, *, succeeded: str, failed: str, log: str) -> None:
    load_pod(kubectl, "load-up", "load-up-abcde")
    kubectl.answer_k("exec", "load-up-abcde", "--", "python", "-c", STOP)
    kubectl.answer_k("get", "job", "load-up", "-o", SUCCEEDED, stdout=succeeded)
    kubectl.answer_k("get", "job", "load-up", "-o", FAILED, stdout=failed)
    kubectl.answer_k("logs", "load-up-abcde", stdout=log)


def test_stop_load_accepts_a_load_that_succeeded(kubectl: StandInKubectl, artifacts: Path) -> None:
    log = "publishing to ['orders']\nlost 0\n" + RESULT
    finished_load(kubectl, succeeded="1", failed="", log=log)
    done = run(kubectl, AS_STEP, "stop_load", "load-up", artifacts=artifacts)
    assert done.returncode == 0, done.stderr
    assert "load load-up: 0 acknowledged messages lost" in done.stderr
    assert (artifacts / "load-up.log").read_text(encoding="utf-8") == log
    calls = [c.args for c in kubectl.calls()]
    stopped = calls.index(["--namespace", NAMESPACE, "exec", "load-up-abcde", "--", "python", "-c", STOP])
    assert stopped < calls.index(["--namespace", NAMESPACE, "get", "job", "load-up", "-o", FAILED]), \
        "the load is told to stop before its verdict is awaited"


def test_stop_load_rejects_a_load_that_lost_messages(kubectl: StandInKubectl, artifacts: Path) -> None:
    result = {"lost": 3, "published": 812}
    finished_load(kubectl, succeeded="", failed="1", log=f"publishing to ['orders']\nRESULT {json.dumps(result)}\n")
    done = run(kubectl, AS_STEP, "stop_load", "load-up", artifacts=artifacts)
    assert done.returncode == 1
    assert "FAILED: load load-up: acknowledged messages were lost or not delivered" in done.stderr
    assert "0 acknowledged messages lost" not in done.stderr


def test_stop_load_rejects_a_load_without_a_verdict(kubectl: StandInKubectl, artifacts: Path) -> None:
    finished_load(kubectl, succeeded="1", failed="", log="publishing to ['orders']\nTraceback ...\n")
    done = run(kubectl, AS_STEP, "stop_load", "load-up", artifacts=artifacts)
    assert done.returncode == 1
    assert "FAILED: load load-up printed no RESULT line" in done.stderr


# check_roll_order -------------------------------------------------------------------------

PATCHED_AT = "2025-03-01T10:00:00Z"


def created(kubectl: StandInKubectl, **timestamps: str) -> None:
    for ordinal, stamp in timestamps.items():
        kubectl.answer_k("get", "pod", f"nsq-nsqd-{ordinal[1:]}", "-o", CREATED, stdout=stamp)


def test_check_roll_order_accepts_every_nsqd_replaced_highest_ordinal_first(kubectl: StandInKubectl) -> None:
    created(kubectl, n2="2025-03-01T10:00:40Z", n1="2025-03-01T10:01:30Z", n0="2025-03-01T10:02:10Z")
    done = run(kubectl, AS_STEP, "check_roll_order", PATCHED_AT)
    assert done.returncode == 0, done.stderr
    assert "nsqd pods replaced in order 2, 1, 0" in done.stderr


def test_check_roll_order_rejects_a_pod_that_was_not_replaced(kubectl: StandInKubectl) -> None:
    created(kubectl, n2="2025-03-01T10:00:40Z", n1="2025-03-01T10:01:30Z", n0="2025-03-01T09:12:00Z")
    done = run(kubectl, AS_STEP, "check_roll_order", PATCHED_AT)
    assert done.returncode == 1
    assert "FAILED: nsq-nsqd-0 was not replaced (created 2025-03-01T09:12:00Z)" in done.stderr


def test_check_roll_order_rejects_a_lower_ordinal_replaced_first(kubectl: StandInKubectl) -> None:
    created(kubectl, n2="2025-03-01T10:01:30Z", n1="2025-03-01T10:00:40Z", n0="2025-03-01T10:02:10Z")
    done = run(kubectl, AS_STEP, "check_roll_order", PATCHED_AT)
    assert done.returncode == 1
    assert "FAILED: nsq-nsqd-1 was replaced before a higher ordinal" in done.stderr
    assert "in order 2, 1, 0" not in done.stderr


def test_check_roll_order_stops_when_a_pod_is_missing(kubectl: StandInKubectl) -> None:
    created(kubectl, n2="2025-03-01T10:00:40Z")
    kubectl.not_found("get", "pod", "nsq-nsqd-1", "-o", CREATED)
    done = run(kubectl, AS_STEP, "check_roll_order", PATCHED_AT)
    assert done.returncode != 0
    assert "NotFound" in done.stderr and "in order 2, 1, 0" not in done.stderr


# tls_rolled_from (scenario-tls.sh) ---------------------------------------------------------

REVISIONS = r'jsonpath={range .items[*]}{.metadata.annotations.nsq\.dev/tls-revision}{"\n"}{end}'


def tls_cluster(kubectl: StandInKubectl, revisions: str, **state: str) -> None:
    cluster(kubectl, nsqd_pods=state.pop("nsqd_pods", "") or "".join(pod(f"nsq-nsqd-{i}", image=OLD)
                                                                         for i in range(3)), **state)
    kubectl.answer_k("get", "pods", "--selector", NSQD, "-o", REVISIONS, stdout=revisions)


def test_tls_rolled_from_once_every_nsqd_carries_one_new_revision(kubectl: StandInKubectl) -> None:
    tls_cluster(kubectl, "bbbb\nbbbb\nbbbb\n")
    assert check(kubectl, "tls_rolled_from", "aaaa", "3")


@pytest.mark.parametrize("revisions, state", [
    ("aaaa\naaaa\naaaa\n", {}),
    ("bbbb\naaaa\nbbbb\n", {}),
    ("bbbb\nbbbb\n", {}),
    ("bbbb\ncccc\nbbbb\n", {}),
    ("bbbb\nbbbb\nbbbb\n", {"phase": "Draining"}),
    ("bbbb\nbbbb\nbbbb\n", {"nsqd_pods": pod("nsq-nsqd-0", image=OLD) + pod("nsq-nsqd-1", image=OLD)
                            + pod("nsq-nsqd-2", image=OLD, ready="False")}),
], ids=["not-renewed", "one-left", "a-pod-missing", "two-revisions", "rolling", "nsqd-unready"])
def test_tls_rolled_from_rejects_a_roll_not_done(kubectl: StandInKubectl, revisions: str,
                                                 state: dict[str, str]) -> None:
    tls_cluster(kubectl, revisions, **state)
    assert not check(kubectl, "tls_rolled_from", "aaaa", "3")
