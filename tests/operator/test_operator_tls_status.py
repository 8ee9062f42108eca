"""What an NsqCluster with spec.tls says while nsqd cannot have its certificate: the
cluster's API server does not serve cert-manager (no Certificate CRD), the Secret of
spec.tls.secretName does not exist, or lacks a key. In each case nsqd's StatefulSet is not
made (a pod could not mount the Secret) and the cluster is Degraded with the reason; the
cluster comes up once the Secret is complete, and turning TLS and the optional objects
off again deletes what was made for them."""
from __future__ import annotations

import base64

import pytest

from tests.operator.conftest import NAMESPACE
from tests.operator.harness import OperatorUnderTest

pytestmark = pytest.mark.asyncio(loop_scope="module")


async def degraded_by(operator: OperatorUnderTest, cluster: str, reason: str) -> dict:
    async def probe() -> dict | None:
        found = await operator.condition("NsqCluster", cluster, "Degraded")
        return found if found and found["status"] == "True" and found["reason"] == reason else None
    return await operator.until(probe, 30, f"{cluster} Degraded {reason}")


async def statefulset(operator: OperatorUnderTest, name: str) -> dict | None:
    return await operator.core(f"/apis/apps/v1/namespaces/{NAMESPACE}/statefulsets/{name}")


async def test_an_issuer_without_cert_manager_is_degraded_and_makes_no_nsqd(operator: OperatorUnderTest) -> None:
    await operator.create("NsqCluster", "nocm", {"nsqd": {"replicas": 1}, "lookupd": {"replicas": 1},
                                                 "tls": {"issuerRef": {"name": "ca", "kind": "ClusterIssuer"}}})
    condition = await degraded_by(operator, "nocm", "CertManagerMissing")
    assert "install cert-manager" in condition["message"], condition
    assert await statefulset(operator, "nocm-nsqd") is None
    assert await statefulset(operator, "nocm-lookupd") is not None
    await operator.delete("NsqCluster", "nocm")


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


async def test_a_missing_or_incomplete_secret_is_degraded_until_it_is_complete(operator: OperatorUnderTest) -> None:
    await operator.create("NsqCluster", "own", {"nsqd": {"replicas": 1}, "lookupd": {"replicas": 1},
                                                "tls": {"secretName": "own-tls", "required": "tcp-https"},
                                                "networkPolicy": {"enabled": True}})
    condition = await degraded_by(operator, "own", "TlsSecretMissing")
    assert "own-tls" in condition["message"]
    assert await statefulset(operator, "own-nsqd") is None
    secrets = f"{operator.api}/api/v1/namespaces/{NAMESPACE}/secrets"
    await operator._call("POST", secrets, {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                                           "metadata": {"name": "own-tls", "namespace": NAMESPACE},
                                           "data": {"tls.crt": _b64("not yet")}})
    condition = await degraded_by(operator, "own", "TlsSecretIncomplete")
    assert "tls.key" in condition["message"] and "ca.crt" not in condition["message"], condition
    # tcp-https keeps plain HTTP: ca.crt is not needed; the certificate is not parsed by the
    # operator, nsqd reads it (here nsqd would refuse "not yet": the roll is not the point)
    await operator._call("PATCH", f"{secrets}/own-tls", {"data": {"tls.key": _b64("not yet either")}},
                         "application/merge-patch+json")

    async def made() -> dict | None:
        sts = await statefulset(operator, "own-nsqd")
        return sts if sts and sts["spec"]["template"]["metadata"]["annotations"].get("nsq.dev/tls-revision") else None
    sts = await operator.until(made, 30, "own-nsqd made once the Secret is complete")
    assert {"name": "tls", "secret": {"secretName": "own-tls", "defaultMode": 0o440}} in \
        sts["spec"]["template"]["spec"]["volumes"]
    policy = f"/apis/networking.k8s.io/v1/namespaces/{NAMESPACE}/networkpolicies/own-nsqd"
    assert await operator.core(policy) is not None

    await operator.patch("NsqCluster", "own", {"spec": {"tls": None, "networkPolicy": {"enabled": False}}})

    async def pruned() -> bool:
        sts = await statefulset(operator, "own-nsqd")
        volumes = [v["name"] for v in sts["spec"]["template"]["spec"]["volumes"]]
        return "tls" not in volumes and await operator.core(policy) is None
    await operator.until(pruned, 30, "TLS and the NetworkPolicy gone from own")
    await operator.delete("NsqCluster", "own")


async def test_no_pod_monitor_where_the_prometheus_operator_is_not_installed(operator: OperatorUnderTest) -> None:
    """Scrape annotations only; the PodMonitor is not even tried (the emulator would 404 it)."""
    await operator.create("NsqCluster", "prom", {"nsqd": {"replicas": 1}, "lookupd": {"replicas": 1},
                                                 "metrics": {"prometheus": {"enabled": True}}})
    sts = await operator.until(lambda: statefulset(operator, "prom-nsqd"), 30, "prom-nsqd made")
    assert sts["spec"]["template"]["metadata"]["annotations"]["prometheus.io/scrape"] == "true"
    assert await operator.core(f"/apis/monitoring.coreos.com/v1/namespaces/{NAMESPACE}/podmonitors") is None
    assert not [key for key in await operator.api_requests() if "podmonitors" in key and not key.startswith("Python")]
    await operator.delete("NsqCluster", "prom")
