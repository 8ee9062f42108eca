"""kubectl against the real one-node cluster (`make cluster`), as tests use it."""

from __future__ import annotations

import json
import os
import subprocess
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, TypeVar

import yaml

T = TypeVar("T")
STATE_DIR = Path(os.environ.get("NSQ_CLUSTER_STATE", "/var/lib/nsq-operator-cluster"))
REPO = Path(__file__).resolve().parents[2]


class KubectlError(RuntimeError):
    def __init__(self, args: list[str], stderr: str) -> None:
        super().__init__(f"kubectl {' '.join(args)}: {stderr.strip()}")
        self.stderr = stderr


def cluster_kubeconfig() -> Path | None:
    """The cluster's admin kubeconfig: $KUBECONFIG when set, else the one up.sh writes."""
    named = os.environ.get("KUBECONFIG")
    path = Path(named) if named else STATE_DIR / "admin.kubeconfig"
    return path if path.exists() else None


def kubectl_binary() -> str:
    """The kubectl built with the cluster (same version), else the one on PATH."""
    for built in sorted(Path(os.environ.get("NSQ_CLUSTER_CACHE", Path.home() / ".cache/nsq-operator-cluster")).glob("build-*/bin/kubectl")):
        return str(built)
    return "kubectl"


@dataclass
class Kube:
    kubeconfig: Path
    binary: str = field(default_factory=kubectl_binary)

    def run(self, *args: str, stdin: str | None = None, timeout: float = 120, check: bool = True) -> str:
        command = [self.binary, "--kubeconfig", str(self.kubeconfig), *args]
        done = subprocess.run(command, input=stdin, capture_output=True, text=True, timeout=timeout)
        if check and done.returncode != 0:
            raise KubectlError(list(args), done.stderr)
        return done.stdout

    def helm(self, *args: str, timeout: float = 600) -> str:
        """helm (the tests' offline one) against this cluster; fails the test on an error."""
        from tests.chart.helm import helm_binary

        environment = {**os.environ, "KUBECONFIG": str(self.kubeconfig)}
        done = subprocess.run([helm_binary(), *args], capture_output=True, text=True, timeout=timeout,
                              env=environment)
        assert done.returncode == 0, f"helm {' '.join(args)}: {done.stderr}"
        return done.stdout

    def apply(self, manifests: list[dict[str, Any]] | dict[str, Any], *extra: str) -> str:
        documents = manifests if isinstance(manifests, list) else [manifests]
        return self.run("apply", *extra, "-f", "-", stdin=yaml.safe_dump_all(documents))

    def get(self, kind: str, name: str, namespace: str | None = None) -> dict[str, Any]:
        args = ["get", kind, name, "-o", "json"] + (["-n", namespace] if namespace else [])
        return json.loads(self.run(*args))

    def get_or_none(self, kind: str, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        try:
            return self.get(kind, name, namespace)
        except KubectlError as error:
            if "NotFound" in error.stderr:
                return None
            raise

    def items(self, kind: str, namespace: str, *selector: str) -> list[dict[str, Any]]:
        return json.loads(self.run("get", kind, "-n", namespace, *selector, "-o", "json"))["items"]

    def namespace(self, prefix: str, labels: dict[str, str] | None = None) -> str:
        name = f"{prefix}-{uuid.uuid4().hex[:6]}"
        self.apply({"apiVersion": "v1", "kind": "Namespace",
                    "metadata": {"name": name, "labels": labels or {}}})
        return name


def wait_until(what: str, check: Callable[[], T | None], timeout: float = 120, every: float = 0.5,
               explain: Callable[[], str] | None = None) -> T:
    """Polls ``check`` until it returns something truthy; fails with ``what`` at the deadline,
    and with what ``explain`` reports of the state then (a failure on CI must say why)."""
    deadline = time.monotonic() + timeout
    last_error: Exception | None = None
    while True:
        try:
            result = check()
            if result:
                return result
        except (KubectlError, KeyError, IndexError) as error:
            last_error = error
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}"
                                 + (f" (last error: {last_error})" if last_error else "")
                                 + (f"\n{_explained(explain)}" if explain else ""))
        time.sleep(every)


def _explained(explain: Callable[[], str]) -> str:
    try:
        return explain()
    except Exception as error:  # the snapshot is a courtesy; the timeout is the failure
        return f"(no snapshot of the state: {error!r})"


def namespace_snapshot(kube: Kube, namespace: str, operator_namespace: str | None = None) -> str:
    """What a reader of a failed wait needs: the NSQ objects' conditions, each pod's phase and
    container states, the namespace's latest events, and the operator's last log lines."""
    lines = [f"--- state of namespace {namespace}"]
    for item in json.loads(kube.run("get", "nsqclusters,nsqtopics,nsqchannels", "-n", namespace, "-o", "json",
                                    check=False) or '{"items": []}')["items"]:
        status = item.get("status") or {}
        conditions = [f"{c.get('type')}={c.get('status')}({c.get('reason')}: {c.get('message', '')[:160]})"
                      for c in status.get("conditions") or []]
        lines.append(f"{item['kind']} {item['metadata']['name']}: {'; '.join(conditions) or 'no conditions'}"
                     + (f" rollout={status['rollout']}" if status.get("rollout") else ""))
    for pod_ in json.loads(kube.run("get", "pods", "-n", namespace, "-o", "json", check=False)
                           or '{"items": []}')["items"]:
        states = [f"{c['name']}:{next(iter(c.get('state') or {'?': 0}))} restarts={c.get('restartCount')}"
                  for c in (pod_.get("status") or {}).get("containerStatuses") or []]
        lines.append(f"pod {pod_['metadata']['name']} {pod_.get('status', {}).get('phase')} {' '.join(states)}")
    events = kube.run("get", "events", "-n", namespace, "--sort-by=.lastTimestamp", check=False)
    lines.extend(events.strip().splitlines()[-25:])
    if operator_namespace:
        log = kube.run("logs", "-n", operator_namespace, "-l", "app.kubernetes.io/name=nsq-operator",
                       "--tail", "5000", check=False).splitlines()
        lines.append(f"--- operator log ({operator_namespace}), its last lines naming {namespace}")
        lines.extend([line for line in log if namespace in line][-40:])
        lines.append("--- operator log, its last lines")
        lines.extend(log[-20:])
    return "\n".join(lines)


def project_image() -> str:
    """The image images.sh built from the Dockerfile and up.sh loaded into containerd."""
    version = next(line.split('"')[1] for line in (REPO / "pyproject.toml").read_text().splitlines()
                   if line.startswith("version = "))
    return f"ghcr.io/nsq-operator/nsq-operator:{version}"


def restricted_container(name: str, image: str, command: list[str], **extra: Any) -> dict[str, Any]:
    """A container that passes Pod Security's restricted profile."""
    return {
        "name": name,
        "image": image,
        "imagePullPolicy": "Never",
        "command": command,
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "runAsNonRoot": True,
            "capabilities": {"drop": ["ALL"]},
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        **extra,
    }


def pod(name: str, namespace: str, containers: list[dict[str, Any]], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": {"app": name}},
        "spec": {"containers": containers, **spec},
    }


def connector_pod(name: str, namespace: str, labels: dict[str, str], host: str, port: int,
                  attempts: int = 15) -> dict[str, Any]:
    """A pod that opens `attempts` TCP connections to host:port, a second apart, and prints
    `connected` or the error's name for each: what a NetworkPolicy lets through, seen from
    a pod with these labels."""
    script = ("import socket, time\n"
              f"for _ in range({attempts}):\n"
              "    try:\n"
              f"        socket.create_connection(({host!r}, {port}), timeout=2).close()\n"
              "        print('connected', flush=True)\n"
              "    except OSError as e:\n"
              "        print(type(e).__name__, flush=True)\n"
              "    time.sleep(1)\n")
    made = pod(name, namespace, [restricted_container(name, project_image(), ["python3", "-c", script])],
               restartPolicy="Never")
    made["metadata"]["labels"] = {"app": name, **labels}
    return made


def connection_outcomes(kube: Kube, name: str, namespace: str, timeout: float = 120) -> list[str]:
    """What a connector_pod printed, once it has finished."""
    wait_until(f"pod {namespace}/{name} to finish", lambda: kube.get("pod", name, namespace)
               .get("status", {}).get("phase") in ("Succeeded", "Failed"), timeout=timeout, every=1)
    return kube.run("logs", name, "-n", namespace).split()
