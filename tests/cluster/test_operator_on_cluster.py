"""The user's path on the real cluster: the CRDs applied server-side, the chart installed
into a namespace and under a release name other than the defaults (the operator as a pod
with its own ServiceAccount and RBAC), then e2e/kind/scenario.sh, the scenario users run on
kind: an NsqCluster with topics and channels in a namespace enforcing Pod Security
"restricted", a rolling upgrade (image change) and a scale-down under load from pods, and
not one acknowledged message lost."""

from __future__ import annotations

import os
import re
import subprocess
from datetime import datetime
from pathlib import Path
from typing import Iterator

import pytest

from tests.cluster.kube import REPO, Kube, wait_until

pytestmark = pytest.mark.real_cluster
RELEASE = "queue"
ROLLOUT_IMAGE_REPOSITORY = "localhost/nsq-operator"  # e2e/cluster/up.sh names the image e2e-1 and e2e-2 too


@pytest.fixture(scope="module")
def app_namespace(kube: Kube) -> str:
    """Where the scenario's NsqCluster lives: the only namespace this operator watches, so
    that other operators on the cluster (other test modules install their own) never meet it."""
    return kube.namespace("nsq-app")


@pytest.fixture(scope="module")
def operator_namespace(kube: Kube, app_namespace: str) -> Iterator[str]:
    kube.run("apply", "--server-side", "--force-conflicts", "-f", str(REPO / "crds"))
    for crd in ("nsqclusters", "nsqtopics", "nsqchannels"):
        kube.run("wait", "--for", "condition=Established", "--timeout", "60s", f"crd/{crd}.nsq.dev")
    namespace = kube.namespace("queue-ops")
    kube.helm("install", RELEASE, str(REPO / "charts/nsq-operator"), "--namespace", namespace,
         "--set", "logLevel=info", "--set", "intervals.status=5", "--set", "intervals.drift=10",
         "--set", f"watchNamespaces={{{app_namespace}}}", "--wait", "--timeout", "5m")
    yield namespace
    kube.helm("uninstall", RELEASE, "--namespace", namespace, "--wait", "--timeout", "3m")
    kube.run("delete", "namespace", namespace, "--wait=false", check=False)


def rbac_denials(log: str, deleted: tuple[str, datetime] | None = None) -> list[str]:
    """The apiserver's answer when RBAC refuses a request names the user; a 403 for a
    namespace being deleted (events the operator posts as the scenario ends) does not.
    ``deleted``: a namespace and when its deletion began. Its RoleBinding goes with it,
    so a timer of one of its objects that runs then reads its object, is refused, and
    stops: the operator's designed answer to losing access, not a permission missing."""
    def expected(line: str) -> bool:
        if deleted is None or "is gone for the operator (reading it answers 403" not in line:
            return False
        namespace, since = deleted
        return f"in the namespace \"{namespace}\"" in line and _logged_at(line) >= since
    return [line for line in log.splitlines() if "is forbidden: User" in line and not expected(line)]


def _logged_at(line: str) -> datetime:
    """When the operator logged ``line`` (its records start with a UTC time)."""
    return datetime.strptime(line[:19], "%Y-%m-%d %H:%M:%S")


def deletion_began(scenario_stderr: str) -> datetime:
    found = re.search(r"deleting the cluster \(since (\S+)\)", scenario_stderr)
    assert found, "the scenario did not say when it began deleting the cluster"
    return datetime.strptime(found.group(1), "%Y-%m-%dT%H:%M:%S")


def operator_log(kube: Kube, namespace: str) -> str:
    return kube.run("logs", "-n", namespace, f"deployment/{RELEASE}-nsq-operator", "--tail", "-1", check=False) or \
        kube.run("logs", "-n", namespace, "-l", "app.kubernetes.io/name=nsq-operator", "--tail", "-1", check=False)


def test_the_chart_runs_the_operator_under_its_own_service_account(kube: Kube, operator_namespace: str) -> None:
    pods = kube.items("pods", operator_namespace)
    assert len(pods) == 1
    spec = pods[0]["spec"]
    assert spec["serviceAccountName"] not in ("", "default")
    assert pods[0]["status"]["phase"] == "Running"
    log = wait_until("the operator to log its start", lambda: operator_log(kube, operator_namespace))
    assert rbac_denials(log) == []


@pytest.mark.timeout(1800)
def test_rolling_upgrade_and_scale_down_under_load_lose_nothing(kube: Kube, operator_namespace: str,
                                                               app_namespace: str, tmp_path: Path) -> None:
    namespace = app_namespace
    environment = {
        **os.environ,
        "KUBECONFIG": str(kube.kubeconfig),
        "PATH": f"{Path(kube.binary).parent}:{os.environ['PATH']}" if "/" in kube.binary else os.environ["PATH"],
        "NAMESPACE": namespace,
        "OPERATOR_NAMESPACE": operator_namespace,
        "RELEASE": RELEASE,
        "IMAGE_REPOSITORY": ROLLOUT_IMAGE_REPOSITORY,
        "IMAGE_TAG": "e2e-1",
        "UPGRADE_TAG": "e2e-2",
        "LOAD_RATE": "100",
        "LOAD_WARMUP": "15",
        "LOAD_COOLDOWN": "10",
        "ARTIFACTS_DIR": str(tmp_path),
    }
    done = subprocess.run(["bash", str(REPO / "e2e/kind/scenario.sh")], capture_output=True, text=True,
                          timeout=1500, env=environment)
    print(done.stderr)
    if done.returncode != 0:
        subprocess.run(["bash", "-c", f"source {REPO}/e2e/kind/lib.sh; diagnose"], env=environment, timeout=120)
    assert done.returncode == 0, done.stderr[-5000:]
    results = [line for path in sorted(tmp_path.glob("load-*.log")) for line in path.read_text().splitlines()
               if line.startswith("RESULT ")]
    assert len(results) == 2, results
    for result in results:
        print(result)
    assert rbac_denials(operator_log(kube, operator_namespace), (namespace, deletion_began(done.stderr))) == []
