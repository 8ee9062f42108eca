"""The real one-node cluster's tests (`make test-cluster`): skipped where no cluster runs,
failed instead when NSQ_REQUIRE_CLUSTER=1 (CI, which starts one)."""

from __future__ import annotations

import os
import subprocess
import time
from typing import Iterator

import pytest

from tests.cluster.kube import Kube, KubectlError, cluster_kubeconfig


@pytest.fixture(scope="session")
def kube() -> Kube:
    kubeconfig = cluster_kubeconfig()
    client = Kube(kubeconfig) if kubeconfig is not None else None
    if client is None or not _answers(client):
        # A kubeconfig left by a cluster whose processes were ended (a session's end) is no cluster.
        message = f"no cluster answers{f' at {kubeconfig}' if kubeconfig else ''}: `make cluster` starts one"
        if os.environ.get("NSQ_REQUIRE_CLUSTER") == "1":
            pytest.fail(message)
        pytest.skip(message)
    return client


def _answers(client: Kube) -> bool:
    try:
        client.run("get", "--raw", "/readyz", "--request-timeout", "5s", timeout=15)
    except (KubectlError, subprocess.TimeoutExpired):
        return False
    return True


@pytest.fixture
def namespace(kube: Kube, request: pytest.FixtureRequest) -> Iterator[str]:
    """A namespace of the test's own, deleted after it (without waiting for the deletion)."""
    name = kube.namespace(request.node.name.replace("_", "-")[:40].rstrip("-").lower())
    yield name
    kube.run("delete", "namespace", name, "--wait=false", check=False)


@pytest.fixture(scope="session")
def token_pod(kube: Kube) -> Iterator[tuple[str, float]]:
    """A pod with a bound token that expires in 600 s (the least the apiserver allows): made
    once for the session, early, so its renewal at ~480 s overlaps the other tests."""
    from tests.cluster.kube import pod, project_image, restricted_container, wait_until

    namespace = kube.namespace("token")
    container = restricted_container("token", project_image(), ["python3", "-c", "import time; time.sleep(3600)"],
                                     volumeMounts=[{"name": "token", "mountPath": "/var/run/tokens"}])
    volume = {"name": "token", "projected": {"sources": [{"serviceAccountToken": {
        "path": "token", "expirationSeconds": 600, "audience": "nsq-tests"}}]}}
    kube.apply(pod("token", namespace, [container], volumes=[volume], terminationGracePeriodSeconds=1))
    created = time.time()
    wait_until("the token pod to run", lambda: kube.get("pod", "token", namespace)["status"].get("phase") == "Running")
    yield namespace, created
    kube.run("delete", "namespace", namespace, "--wait=false", check=False)
