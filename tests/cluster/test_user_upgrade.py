"""A user's upgrade on the real cluster (e2e/cluster/upgrade.sh): the previous release's
CRDs, chart and image installed, an NsqCluster under load from pods, then this checkout's
CRDs applied and its chart upgraded to, the new operator taking over the running cluster,
and the cluster's image rolled to this release's under the same load. Not one
acknowledged message lost, nothing left Terminating.

It applies the previous release's CRDs, which are cluster-wide: `make test-cluster` runs
it on its own, after the other modules."""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from pathlib import Path

import pytest

from tests.chart.helm import helm_binary
from tests.cluster.kube import REPO, Kube

pytestmark = pytest.mark.real_cluster


@pytest.mark.timeout(1800)
def test_upgrade_from_the_previous_release_under_load_loses_nothing(kube: Kube, tmp_path: Path) -> None:
    suffix = uuid.uuid4().hex[:6]  # the script makes the namespaces, as a user would
    operators, apps = f"upgrade-ops-{suffix}", f"upgrade-app-{suffix}"
    environment = {
        **os.environ,
        "KUBECONFIG": str(kube.kubeconfig),
        "HELM": helm_binary(),
        "NAMESPACE": apps,
        "OPERATOR_NAMESPACE": operators,
        "RELEASE": "queue",
        "LOAD_RATE": "100",
        "LOAD_WARMUP": "15",
        "LOAD_COOLDOWN": "10",
        "ARTIFACTS_DIR": str(tmp_path),
    }
    try:
        done = subprocess.run(["bash", str(REPO / "e2e/cluster/upgrade.sh")], capture_output=True, text=True,
                              timeout=1500, env=environment)
        print(done.stderr)
        if done.returncode != 0:
            subprocess.run(["bash", "-c", f"source {REPO}/e2e/kind/lib.sh; diagnose"], env=environment, timeout=120)
        assert done.returncode == 0, done.stderr[-5000:]
    finally:
        subprocess.run([helm_binary(), "uninstall", "queue", "--namespace", operators, "--wait", "--timeout", "3m"],
                       env=environment, capture_output=True, timeout=240)
        kube.run("delete", "namespace", operators, apps, "--wait=false", "--ignore-not-found", check=False)
        kube.run("apply", "--server-side", "--force-conflicts", "-f", str(REPO / "crds"), check=False)
    result = next(json.loads(line.removeprefix("RESULT ")) for line in (tmp_path / "load-release-upgrade.log")
                  .read_text().splitlines() if line.startswith("RESULT "))
    print(f"upgrade under load: published {result['published']}, acknowledged {result['acknowledged']}, "
          f"delivered {result['delivered']}, lost {result['lost']}, duplicates {result['duplicates']}")
    assert result["ok"] and result["lost"] == 0 and result["acknowledged"] > 0
