"""What makes the one-node cluster a real Kubernetes, proven on it: the apiserver's Pod
Security admission and RBAC, the kubelet's restarts, probes, SIGTERM and grace period and
token renewal, cluster DNS through kube-proxy's Services, claims bound and grown,
NetworkPolicies enforced."""

from __future__ import annotations

import base64
import json
import subprocess
import time
from typing import Any

import pytest

from tests.cluster.kube import (Kube, KubectlError, connection_outcomes, connector_pod, pod, project_image,
                                restricted_container, wait_until)

pytestmark = pytest.mark.real_cluster
RESTRICTED = {"pod-security.kubernetes.io/enforce": "restricted"}


@pytest.fixture(autouse=True, scope="module")
def _token_pod_first(token_pod: tuple[str, float]) -> None:
    """The token pod starts before the first test: its renewal takes eight minutes."""


def phase(kube: Kube, name: str, namespace: str) -> str:
    return kube.get("pod", name, namespace).get("status", {}).get("phase", "")


def container_status(kube: Kube, name: str, namespace: str) -> dict[str, Any]:
    statuses = kube.get("pod", name, namespace).get("status", {}).get("containerStatuses") or [{}]
    return statuses[0]


def python_pod(name: str, namespace: str, script: str, **spec: Any) -> dict[str, Any]:
    return pod(name, namespace, [restricted_container(name, project_image(), ["python3", "-c", script])], **spec)


def test_the_node_is_ready_and_runs_the_pinned_kubernetes(kube: Kube) -> None:
    nodes = json.loads(kube.run("get", "nodes", "-o", "json"))["items"]
    assert len(nodes) == 1
    ready = {c["type"]: c["status"] for c in nodes[0]["status"]["conditions"]}["Ready"]
    assert ready == "True"
    info = nodes[0]["status"]["nodeInfo"]
    assert info["kubeletVersion"].startswith("v1.")
    assert info["containerRuntimeVersion"].startswith("containerd://")


def test_restricted_namespace_runs_our_image_as_non_root_and_refuses_a_root_pod(kube: Kube) -> None:
    namespace = kube.namespace("restricted", RESTRICTED)
    try:
        kube.apply(python_pod("whoami", namespace, "import os; print('uid', os.getuid(), 'gid', os.getgid())",
                              restartPolicy="Never"))
        wait_until("the pod to finish", lambda: phase(kube, "whoami", namespace) == "Succeeded")
        assert kube.run("logs", "whoami", "-n", namespace).split() == ["uid", "65532", "gid", "65532"]

        root_pod = pod("as-root", namespace, [{"name": "c", "image": project_image(), "imagePullPolicy": "Never",
                                              "command": ["true"], "securityContext": {"runAsUser": 0}}])
        with pytest.raises(KubectlError) as refused:
            kube.apply(root_pod)
        assert "violates PodSecurity \"restricted" in refused.value.stderr
        assert kube.get_or_none("pod", "as-root", namespace) is None
    finally:
        kube.run("delete", "namespace", namespace, "--wait=false", check=False)


def test_pods_find_each_other_through_service_dns(kube: Kube, namespace: str) -> None:
    nsqd = pod("nsqd", namespace, [restricted_container(
        "nsqd", project_image(), ["nsqd", "--data-path=/tmp", "--broadcast-address=nsqd"],
        readinessProbe={"httpGet": {"path": "/ping", "port": 4151}, "periodSeconds": 1})])
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "nsqd", "namespace": namespace},
               "spec": {"selector": {"app": "nsqd"}, "ports": [{"name": "http", "port": 4151}]}}
    publisher = python_pod("publisher", namespace, (
        "import urllib.request as r, socket, json\n"
        f"host = 'nsqd.{namespace}.svc.cluster.local'\n"
        "print('resolved', socket.gethostbyname(host))\n"
        "r.urlopen(r.Request(f'http://{host}:4151/pub?topic=dns', data=b'found by name')).read()\n"
        "stats = json.load(r.urlopen(f'http://nsqd:4151/stats?format=json&topic=dns'))\n"
        "print('depth', stats['topics'][0]['depth'])\n"), restartPolicy="OnFailure")
    kube.apply([nsqd, service])
    wait_until("nsqd to be ready", lambda: container_status(kube, "nsqd", namespace).get("ready"))
    kube.apply(publisher)
    wait_until("the publisher to finish", lambda: phase(kube, "publisher", namespace) == "Succeeded", timeout=90)
    lines = kube.run("logs", "publisher", "-n", namespace).splitlines()
    service_ip = kube.get("service", "nsqd", namespace)["spec"]["clusterIP"]
    assert lines == [f"resolved {service_ip}", "depth 1"]


def test_a_network_policy_admits_the_pods_it_names_and_no_other(kube: Kube, namespace: str) -> None:
    serve = "import http.server as h; h.HTTPServer(('', 8080), h.BaseHTTPRequestHandler).serve_forever()"
    server = pod("server", namespace, [restricted_container(
        "server", project_image(), ["python3", "-c", serve],
        readinessProbe={"tcpSocket": {"port": 8080}, "periodSeconds": 1})])
    policy = {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
              "metadata": {"name": "server", "namespace": namespace},
              "spec": {"podSelector": {"matchLabels": {"app": "server"}}, "policyTypes": ["Ingress"],
                       "ingress": [{"from": [{"podSelector": {"matchLabels": {"role": "client"}}}],
                                    "ports": [{"protocol": "TCP", "port": 8080}]}]}}
    kube.apply([server, policy])
    wait_until("the server to be ready", lambda: container_status(kube, "server", namespace).get("ready"))
    address = kube.get("pod", "server", namespace)["status"]["podIP"]
    kube.apply([connector_pod("named", namespace, {"role": "client"}, address, 8080),
                connector_pod("stranger", namespace, {"role": "other"}, address, 8080)])
    named = connection_outcomes(kube, "named", namespace)
    stranger = connection_outcomes(kube, "stranger", namespace)
    # the policy controller learns a new pod's address within a moment of its start: the
    # named pod's first attempts may come before it
    assert named[-5:] == ["connected"] * 5, named
    assert "connected" not in stranger, stranger
    kube.run("delete", "networkpolicy", "server", "-n", namespace)
    kube.run("delete", "pod", "stranger", "-n", namespace)
    kube.apply(connector_pod("stranger", namespace, {"role": "other"}, address, 8080, attempts=8))
    assert connection_outcomes(kube, "stranger", namespace)[-3:] == ["connected"] * 3


def claim(name: str, namespace: str, storage_class: str, size: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name, "namespace": namespace},
            "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": storage_class,
                     "resources": {"requests": {"storage": size}}}}


def capacity(kube: Kube, name: str, namespace: str) -> str | None:
    status = kube.get("pvc", name, namespace).get("status", {})
    return status.get("capacity", {}).get("storage") if status.get("phase") == "Bound" else None


def test_a_claim_binds_grows_and_a_class_without_expansion_refuses_growth(kube: Kube, namespace: str) -> None:
    kube.apply([claim("grows", namespace, "nsq-local", "1Gi"), claim("fixed", namespace, "nsq-fixed", "1Gi")])
    assert wait_until("the claims to bind", lambda: capacity(kube, "grows", namespace)) == "1Gi"
    wait_until("the fixed claim to bind", lambda: capacity(kube, "fixed", namespace))

    kube.run("patch", "pvc", "grows", "-n", namespace, "-p", '{"spec":{"resources":{"requests":{"storage":"2Gi"}}}}')
    wait_until("the claim to grow", lambda: capacity(kube, "grows", namespace) == "2Gi")
    volume = kube.get("pvc", "grows", namespace)["spec"]["volumeName"]
    assert kube.get("pv", volume)["spec"]["capacity"]["storage"] == "2Gi"

    with pytest.raises(KubectlError) as refused:
        kube.run("patch", "pvc", "fixed", "-n", namespace, "-p", '{"spec":{"resources":{"requests":{"storage":"2Gi"}}}}')
    assert "Forbidden" in refused.value.stderr and "resize" in refused.value.stderr


def test_a_service_account_needs_a_role_the_apiserver_enforces(kube: Kube, namespace: str) -> None:
    script = (
        "import ssl, sys, urllib.request as r, urllib.error as e\n"
        "sa = '/var/run/secrets/kubernetes.io/serviceaccount'\n"
        "token = open(sa + '/token').read()\n"
        "context = ssl.create_default_context(cafile=sa + '/ca.crt')\n"
        f"request = r.Request('https://kubernetes.default.svc/api/v1/namespaces/{namespace}/configmaps',\n"
        "                     headers={'Authorization': 'Bearer ' + token})\n"
        "try:\n"
        "    print(r.urlopen(request, context=context).status)\n"
        "except e.HTTPError as error:\n"
        "    print(error.code)\n")
    kube.apply([{"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "reader", "namespace": namespace}},
                pod("idle", namespace, [restricted_container("idle", project_image(),
                                                             ["python3", "-c", "import time; time.sleep(600)"])],
                    serviceAccountName="reader", terminationGracePeriodSeconds=1)])
    wait_until("the pod to run", lambda: container_status(kube, "idle", namespace).get("ready"))

    def ask() -> str:
        return kube.run("exec", "idle", "-n", namespace, "--", "python3", "-c", script).strip()

    assert ask() == "403"
    kube.apply([
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
         "metadata": {"name": "read-configmaps", "namespace": namespace},
         "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
         "metadata": {"name": "reader", "namespace": namespace},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "read-configmaps"},
         "subjects": [{"kind": "ServiceAccount", "name": "reader", "namespace": namespace}]},
    ])
    wait_until("the role to take effect", lambda: ask() == "200", timeout=30)


def test_an_exiting_container_is_restarted_and_a_hung_one_killed_by_its_liveness_probe(kube: Kube, namespace: str) -> None:
    exits = python_pod("exits", namespace, "print('done')")  # exit 0 under restartPolicy Always
    hangs = pod("hangs", namespace, [restricted_container(
        "hangs", project_image(), ["python3", "-c", "import time; time.sleep(3600)"],
        livenessProbe={"exec": {"command": ["test", "-e", "/tmp/alive"]}, "periodSeconds": 1, "failureThreshold": 2})],
        terminationGracePeriodSeconds=1)
    kube.apply([exits, hangs])
    wait_until("the exiting container to be restarted",
               lambda: container_status(kube, "exits", namespace).get("restartCount", 0) >= 2, timeout=120)
    status = wait_until("the hung container to be killed and restarted",
                        lambda: (s := container_status(kube, "hangs", namespace)).get("restartCount", 0) >= 1 and s,
                        timeout=120)
    assert status["lastState"]["terminated"]["exitCode"] in (137, 143)
    events = json.loads(kube.run("get", "events", "-n", namespace, "--field-selector",
                                 "involvedObject.name=hangs", "-o", "json"))["items"]
    assert any("Liveness probe failed" in event.get("message", "") for event in events)


def test_deletion_sends_sigterm_and_waits_the_grace_period(kube: Kube, namespace: str) -> None:
    script = (
        "import signal, sys, time\n"
        "def term(*_):\n"
        "    print('SIGTERM', flush=True)\n"
        "signal.signal(signal.SIGTERM, term)\n"
        "print('ready', flush=True)\n"
        "while True:\n"
        "    time.sleep(0.1)\n")
    kube.apply(python_pod("stubborn", namespace, script, terminationGracePeriodSeconds=4))
    wait_until("the pod to run", lambda: "ready" in kube.run("logs", "stubborn", "-n", namespace))
    follower = subprocess.Popen([kube.binary, "--kubeconfig", str(kube.kubeconfig), "logs", "-f", "stubborn",
                                 "-n", namespace], stdout=subprocess.PIPE, text=True)
    try:
        wait_until("the log follower to start", lambda: follower.stdout is not None and follower.stdout.readline())
        started = time.monotonic()
        kube.run("delete", "pod", "stubborn", "-n", namespace, "--wait=true", timeout=60)
        took = time.monotonic() - started
        output, _ = follower.communicate(timeout=30)
    finally:
        follower.kill()
    assert "SIGTERM" in output  # the kubelet's signal reached the process, which ignored it ...
    assert 3.5 <= took < 20     # ... so it was killed only when the 4 s grace period ran out


@pytest.mark.timeout(900)
def test_a_bound_token_expires_and_the_kubelet_renews_it(kube: Kube, token_pod: tuple[str, float]) -> None:
    namespace, created = token_pod

    def token_claims() -> dict[str, Any]:
        token = kube.run("exec", "token", "-n", namespace, "--", "cat", "/var/run/tokens/token")
        payload = token.split(".")[1]
        return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))

    first = token_claims()
    assert first["exp"] - first["iat"] == 600  # bound to the pod, expiring: not a legacy secret token
    assert first["kubernetes.io"]["pod"]["name"] == "token"
    # The kubelet rotates a projected token after 80% of its life (480 s), at its next sync.
    renewed = wait_until("the kubelet to renew the token",
                         lambda: (claims := token_claims())["iat"] > first["iat"] and claims,
                         timeout=max(60.0, created + 660 - time.time()), every=5)
    assert renewed["exp"] - renewed["iat"] == 600
