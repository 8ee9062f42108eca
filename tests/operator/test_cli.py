"""The ``nsq-operator`` command as deployed: it logs in from a kubeconfig, watches every
namespace and builds a cluster's objects (here against KMock's emulator)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.operator.harness import Backstage, OperatorUnderTest

NAMESPACE = "nsq-cli"


@pytest.mark.asyncio
async def test_the_command_logs_in_from_a_kubeconfig_and_reconciles(tmp_path: Path) -> None:
    backstage = Backstage(tmp_path, NAMESPACE).start()
    operator: subprocess.Popen[bytes] | None = None
    client = OperatorUnderTest(backstage, NAMESPACE)  # used only as an API client here
    try:
        kubeconfig = tmp_path / "kubeconfig"
        kubeconfig.write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "current-context": "emulator",
            "clusters": [{"name": "emulator", "cluster": {"server": backstage.url}}],
            "users": [{"name": "tester", "user": {"token": backstage.token()}}],
            "contexts": [{"name": "emulator", "context": {"cluster": "emulator", "user": "tester"}}]}))
        log = open(tmp_path / "operator.log", "wb")
        operator = subprocess.Popen([sys.executable, "-m", "nsq_operator.cli", "--liveness=", "--status-interval=1"],
                                    env={**os.environ, "KUBECONFIG": str(kubeconfig)}, stdout=log,
                                    stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        await client.create("NsqCluster", "cli", {"nsqd": {"replicas": 0}, "lookupd": {"replicas": 1}})

        async def built() -> bool:
            return await client.core(f"/apis/apps/v1/namespaces/{NAMESPACE}/statefulsets/cli-lookupd") is not None
        await client.until(built, 40, "the operator process built the StatefulSets")
        assert await client.core(f"/api/v1/namespaces/{NAMESPACE}/configmaps/cli-nsq-config") is not None
    finally:
        if operator is not None:
            os.killpg(operator.pid, signal.SIGTERM)
            try:
                operator.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(operator.pid, signal.SIGKILL)
                operator.wait(10)
        await client.session.close()
        backstage.stop()
    assert operator.returncode == 0, (tmp_path / "operator.log").read_text()[-3000:]
