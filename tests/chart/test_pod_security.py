"""Every pod the project ships meets Pod Security "restricted": the nsqd and nsqlookupd
templates the operator builds (defaults, every knob set, a user's override) and the
operator's own Deployment as `helm template` renders it. Checked twice: by the
restricted profile's rules (tests/operator/pod_security.py) and by checkov, an
independent scanner from PyPI installed by `make install` in a virtual environment of its
own (.venv-checkov); each checkov rule the project does not follow is waived below with its reason."""
from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from nsq_operator.builders import build_cluster
from tests.chart.render import ROOT, Helm
from tests.chart.values import CUSTOM
from tests.operator.pod_security import manifest_violations
from tests.operator.samples import cluster
from tests.operator.test_builders import RICH_SPEC
from tests.operator.test_pod_template import LOOKUPD_OVERRIDE, OVERRIDE

# check -> (why it is not followed, the kinds it is waived for; None: every kind)
WAIVED: dict[str, tuple[str, set[str] | None]] = {
    "CKV_K8S_11": ("CPU limits: a CPU limit throttles nsqd in the middle of a burst (latency), so none is set by "
                   "default; spec.nsqd.resources.limits sets one", None),
    "CKV_K8S_13": ("memory limits: what nsqd needs grows with mem-queue-size times the message size, which only "
                   "the cluster's owner knows; spec.nsqd.resources.limits sets one (the example does)", None),
    "CKV_K8S_43": ("image digests: the image is the one the user names (a release tag by default); a digest is "
                   "accepted wherever an image is", None),
    "CKV_K8S_15": ("pull policy Always: release tags are never moved, IfNotPresent spares a registry round trip per "
                   "restart; spec.imagePullPolicy and the chart's image.pullPolicy set Always", None),
    "CKV2_K8S_6": ("NetworkPolicy: producers and consumers of any namespace must reach nsqd, which only the "
                   "cluster's owner can narrow down; none is created for them", None),
    "CKV_K8S_38": ("the operator's own token: it calls the API server with it (nsqd and nsqlookupd pods mount none)",
                   {"Deployment"}),
    "CKV_K8S_9": ("the operator's readiness probe: one replica that no Service sends traffic to, so readiness "
                  "gates nothing; its liveness probe (kopf's /healthz) restarts it when it hangs", {"Deployment"}),
}


def waived(check: str, kind: str) -> bool:
    reason, kinds = WAIVED.get(check, ("", set()))
    return kinds is None or kind in kinds


def checkov_binary() -> str:
    local = ROOT / ".venv-checkov" / "bin" / "checkov"
    found = str(local) if local.exists() else shutil.which("checkov")
    assert found, "checkov is missing: `make install` puts it in .venv-checkov"
    return found


def shipped_workloads(helm: Helm) -> list[dict[str, Any]]:
    manifests = []
    for spec in ({}, RICH_SPEC, {"nsqd": {"podTemplate": OVERRIDE}, "lookupd": {"podTemplate": LOOKUPD_OVERRIDE}}):
        manifests += [m for m in build_cluster(cluster(**spec)) if m["kind"] in ("StatefulSet", "Deployment")]
    for values in (None, CUSTOM):
        manifests += [o for o in helm.template(values) if o["kind"] == "Deployment"]
    # the kind scenario's load runs in the restricted namespace beside the cluster
    job = (ROOT / "e2e" / "kind" / "load-job.yaml").read_text().replace("__IMAGE__", "nsq-operator:e2e-1")
    manifests += [d for d in yaml.safe_load_all(job) if d]
    for index, manifest in enumerate(manifests):  # unique names: checkov reports by kind, namespace and name
        manifest["metadata"]["name"] = f"{manifest['metadata']['name']}-{index}"
    return manifests


@pytest.fixture(scope="module")
def workloads(helm: Helm) -> list[dict[str, Any]]:
    return shipped_workloads(helm)


def test_every_shipped_pod_meets_the_restricted_profile(workloads: list[dict[str, Any]]) -> None:
    assert {w["kind"] for w in workloads} == {"StatefulSet", "Deployment", "Job"}
    for workload in workloads:
        assert manifest_violations(workload) == [], workload["metadata"]["name"]


def test_checkov_finds_nothing_but_the_waived(workloads: list[dict[str, Any]], tmp_path: Path) -> None:
    (tmp_path / "workloads.yaml").write_text(yaml.safe_dump_all(workloads))
    done = subprocess.run([checkov_binary(), "--directory", str(tmp_path), "--framework", "kubernetes",
                           "--compact", "--output", "json", "--skip-download"],
                          capture_output=True, text=True, timeout=300)
    report = json.loads(done.stdout)
    results = report["results"]
    assert results["passed_checks"], "checkov checked nothing"
    failed = sorted({(r["check_id"], r["resource"].split(".")[0] + " " + r["resource"].split(".")[2], r["check_name"])
                     for r in results["failed_checks"] if not waived(r["check_id"], r["resource"].split(".")[0])})
    assert failed == [], "\n".join(map(str, failed))
    passed = {r["check_id"] for r in results["passed_checks"]}
    # the rules of the restricted profile checkov has, each passed by every workload
    assert {"CKV_K8S_20", "CKV_K8S_23", "CKV_K8S_28", "CKV_K8S_31", "CKV_K8S_37", "CKV_K8S_40"} <= passed
