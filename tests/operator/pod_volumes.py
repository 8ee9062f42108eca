"""The test kubelet's share of Secret volumes and HTTPS: a pod's Secret volumes become
directories of files in its work directory (as the kubelet projects them), the
container's flags are pointed there, and an nsqd with a certificate gets an HTTPS
listener of its own and is probed over HTTPS without verification, as a kubelet probes."""
from __future__ import annotations

import base64
import ssl
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Awaitable, Callable

from tests.servers import Nsqd, free_port

SecretReader = Callable[[str], Awaitable[dict[str, Any] | None]]

PROBE_CONTEXT = ssl.create_default_context()
PROBE_CONTEXT.check_hostname = False
PROBE_CONTEXT.verify_mode = ssl.CERT_NONE  # a kubelet's HTTPS probe verifies nothing


class VolumeNotReady(Exception):
    """A Secret a volume names does not exist: the pod stays ContainerCreating."""


async def project_secrets(pod_spec: dict[str, Any], container: dict[str, Any], workdir: Path,
                          read_secret: SecretReader) -> dict[str, Path]:
    """Write each Secret volume the container mounts; returns mount path -> local directory."""
    secrets = {v["name"]: v["secret"]["secretName"] for v in pod_spec.get("volumes", []) if "secret" in v}
    mounted: dict[str, Path] = {}
    for mount in container.get("volumeMounts", []):
        secret_name = secrets.get(mount["name"])
        if secret_name is None:
            continue
        secret = await read_secret(secret_name)
        if secret is None:
            raise VolumeNotReady(f"Secret {secret_name} of volume {mount['name']} does not exist")
        directory = workdir / "volumes" / mount["name"]
        directory.mkdir(parents=True, exist_ok=True)
        for key, value in (secret.get("data") or {}).items():
            (directory / key).write_bytes(base64.b64decode(value))
        mounted[mount["mountPath"].rstrip("/")] = directory
    return mounted


def local_paths(flags: dict[str, Any], mounted: dict[str, Path]) -> dict[str, Any]:
    """Flag values under a mounted path, pointed at the local directory."""
    def local(value: Any) -> Any:
        if isinstance(value, list):
            return [local(v) for v in value]
        for path, directory in mounted.items():
            if isinstance(value, str) and value.startswith(path + "/"):
                return str(directory / value[len(path) + 1:])
        return value
    return {name: local(value) for name, value in flags.items()}


class PodNsqd(Nsqd):
    """An nsqd as a pod runs it; with ``--tls-cert`` it listens for HTTPS on a port of its
    own, and readiness at start is asked over HTTPS when plain HTTP is closed."""

    def __init__(self, workdir: Path, flags: dict[str, Any], host: str) -> None:
        super().__init__(workdir, flags, host=host)
        self.https_port: int | None = None
        if self.flags.get("tls-cert"):
            self.https_port = free_port(host)
            self.flags["https-address"] = f"{host}:{self.https_port}"

    @property
    def https_only(self) -> bool:
        return self.https_port is not None and str(self.flags.get("tls-required")) == "true"

    def probe_url(self, path: str) -> str:
        return f"https://{self.host}:{self.https_port}{path}" if self.https_only else self.url(path)

    def answers_ping(self) -> bool:
        if not self.https_only:
            return super().answers_ping()
        try:
            with urllib.request.urlopen(self.probe_url("/ping"), timeout=1, context=PROBE_CONTEXT) as r:
                return r.status == 200
        except urllib.error.URLError:
            return False
