"""The one-node cluster's storage: a provisioner and resizer for directories on the node.

For every claim of a StorageClass whose provisioner is `nsq.dev/local-directory`, it makes
a directory and a hostPath PersistentVolume reserved for the claim (kube-controller-manager's
volume controller binds them); when a bound claim asks for more, it grows the volume and
reports the new capacity in the claim's status, as kubernetes-csi's external-resizer does for
a driver that needs no node-side step; a released volume of a Delete class is removed with
its directory. It stands in for kubernetes-csi's hostpath driver and sidecars, which these
machines cannot fetch: the apiserver's checks (allowVolumeExpansion, shrinking refused), the
binding and the claim's status are all Kubernetes' own; what is not exercised is CSI itself.
"""

from __future__ import annotations

import argparse
import json
import shutil
import ssl
import sys
import time
import urllib.error
import urllib.request
from decimal import Decimal
from pathlib import Path
from typing import Any

PROVISIONER = "nsq.dev/local-directory"
SUFFIXES = {
    "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60,
    "n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"),
    "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18,
}


def quantity_bytes(quantity: str) -> Decimal:
    for suffix in sorted(SUFFIXES, key=len, reverse=True):
        if quantity.endswith(suffix):
            return Decimal(quantity[: -len(suffix)]) * SUFFIXES[suffix]
    return Decimal(quantity)


class Cluster:
    """The apiserver's REST API over HTTPS with a client certificate: three reads a pass,
    without a kubectl process each (which cost a third of a core at two passes a second)."""

    def __init__(self, server: str, ca: str, cert: str, key: str) -> None:
        self.server = server.rstrip("/")
        self.context = ssl.create_default_context(cafile=ca)
        self.context.load_cert_chain(cert, key)

    def request(self, method: str, path: str, body: dict[str, Any] | None = None,
                content_type: str = "application/json") -> dict[str, Any]:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.server + path, data=data, method=method,
                                         headers={"Content-Type": content_type, "Accept": "application/json"})
        try:
            with urllib.request.urlopen(request, context=self.context, timeout=30) as answer:
                return json.loads(answer.read() or b"{}")
        except urllib.error.HTTPError as error:
            raise RuntimeError(f"{method} {path}: {error.code} {error.read()[:300]!r}") from error

    def items(self, path: str) -> list[dict[str, Any]]:
        return self.request("GET", path)["items"]

    def merge_patch(self, path: str, body: dict[str, Any]) -> None:
        self.request("PATCH", path, body, "application/merge-patch+json")


def provision(cluster: Cluster, root: Path, claim: dict[str, Any], reclaim_policy: str) -> None:
    meta, spec = claim["metadata"], claim["spec"]
    name = f"pvc-{meta['uid']}"
    directory = root / name
    directory.mkdir(parents=True, exist_ok=True)
    directory.chmod(0o777)  # pods run as any non-root user: the volume must take their writes
    volume = {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name, "annotations": {"pv.kubernetes.io/provisioned-by": PROVISIONER}},
        "spec": {
            "capacity": {"storage": spec["resources"]["requests"]["storage"]},
            "accessModes": spec.get("accessModes", ["ReadWriteOnce"]),
            "persistentVolumeReclaimPolicy": reclaim_policy,
            "storageClassName": spec["storageClassName"],
            "volumeMode": spec.get("volumeMode", "Filesystem"),
            "hostPath": {"path": str(directory), "type": "Directory"},
            "claimRef": {"namespace": meta["namespace"], "name": meta["name"], "uid": meta["uid"]},
        },
    }
    cluster.request("POST", "/api/v1/persistentvolumes", volume)
    print(f"provisioned {name} for {meta['namespace']}/{meta['name']}", flush=True)


def grow(cluster: Cluster, claim: dict[str, Any], requested: str) -> None:
    meta = claim["metadata"]
    volume = claim["spec"]["volumeName"]
    cluster.merge_patch(f"/api/v1/persistentvolumes/{volume}", {"spec": {"capacity": {"storage": requested}}})
    status = {
        "capacity": {"storage": requested},
        "allocatedResources": {"storage": requested},
        "allocatedResourceStatuses": None,
        "conditions": None,
    }
    cluster.merge_patch(f"/api/v1/namespaces/{meta['namespace']}/persistentvolumeclaims/{meta['name']}/status",
                        {"status": status})
    print(f"grew {volume} ({meta['namespace']}/{meta['name']}) to {requested}", flush=True)


def reclaim(cluster: Cluster, root: Path, volume: dict[str, Any]) -> None:
    name = volume["metadata"]["name"]
    shutil.rmtree(root / name, ignore_errors=True)
    cluster.request("DELETE", f"/api/v1/persistentvolumes/{name}")
    print(f"deleted {name}", flush=True)


def one_pass(cluster: Cluster, root: Path) -> None:
    classes = {
        item["metadata"]["name"]: item.get("reclaimPolicy", "Delete")
        for item in cluster.items("/apis/storage.k8s.io/v1/storageclasses")
        if item.get("provisioner") == PROVISIONER
    }
    volumes = cluster.items("/api/v1/persistentvolumes")
    volume_names = {item["metadata"]["name"] for item in volumes}
    for claim in cluster.items("/api/v1/persistentvolumeclaims"):
        meta, spec, status = claim["metadata"], claim["spec"], claim.get("status", {})
        if spec.get("storageClassName") not in classes or meta.get("deletionTimestamp"):
            continue
        if not spec.get("volumeName") and f"pvc-{meta['uid']}" not in volume_names:
            provision(cluster, root, claim, classes[spec["storageClassName"]])
        elif status.get("phase") == "Bound":
            requested = spec["resources"]["requests"]["storage"]
            capacity = status.get("capacity", {}).get("storage", "0")
            if quantity_bytes(requested) > quantity_bytes(capacity):
                grow(cluster, claim, requested)
    for volume in volumes:
        annotations = volume["metadata"].get("annotations", {})
        if (annotations.get("pv.kubernetes.io/provisioned-by") == PROVISIONER
                and volume.get("status", {}).get("phase") == "Released"
                and volume["spec"].get("persistentVolumeReclaimPolicy") == "Delete"):
            reclaim(cluster, root, volume)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", required=True, help="the apiserver's URL")
    parser.add_argument("--ca", required=True, help="the CA certificate that signed the apiserver's")
    parser.add_argument("--cert", required=True, help="the client certificate")
    parser.add_argument("--key", required=True, help="the client certificate's key")
    parser.add_argument("--root", type=Path, required=True)
    parser.add_argument("--interval", type=float, default=0.5)
    args = parser.parse_args()
    cluster = Cluster(args.server, args.ca, args.cert, args.key)
    while True:
        try:
            one_pass(cluster, args.root)
        except (RuntimeError, OSError, KeyError, ValueError) as error:
            print(f"pass failed, retrying: {error}", file=sys.stderr, flush=True)
        time.sleep(args.interval)


if __name__ == "__main__":
    main()
