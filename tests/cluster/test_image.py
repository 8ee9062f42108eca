"""The project's image as e2e/cluster/images.sh built it for the cluster (`make cluster`):
built a second time from the same tree it is the same image, byte for byte; it runs as uid
65532 with `nsq-operator` as its command; it holds the project and its pinned dependencies
and nothing else, at a size a regression would break; its SBOM names what it holds.

These need buildah and images.sh's archive of this tree, not a running cluster: they are
skipped where either is missing, failed instead when NSQ_REQUIRE_CLUSTER=1."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tarfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import pytest

from tests.cluster.kube import REPO, project_image

pytestmark = pytest.mark.real_cluster
IMAGES_SH = REPO / "e2e" / "cluster" / "images.sh"
REBUILT = "localhost/nsq-operator:reproduced"
# What the project's own layers (everything above the base) may weigh: ~33 MB today; Spark
# or the test tools in the image would be hundreds.
PROJECT_LAYERS_CEILING = 80 * 1024 * 1024


@dataclass(frozen=True)
class Built:
    archive: Path
    sbom: Path
    image_id: str  # sha256:..., the digest of the image's config
    config: dict[str, Any]
    layer_sizes: list[int]


def images_sh(script: str) -> str:
    """Runs bash code with images.sh's functions (sourced, so its main part does not run)."""
    done = subprocess.run(["bash", "-c", f'source "{IMAGES_SH}" && {script}'], capture_output=True, text=True,
                          timeout=900, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip()


def _missing(why: str) -> None:
    if os.environ.get("NSQ_REQUIRE_CLUSTER") == "1":
        pytest.fail(why)
    pytest.skip(why)


def read_archive(archive: Path) -> tuple[str, dict[str, Any], list[int]]:
    """A docker-archive's image ID, config and layer sizes (uncompressed)."""
    with tarfile.open(archive) as outer:
        [manifest] = json.load(_extract(outer, "manifest.json"))
        config = json.load(_extract(outer, manifest["Config"]))
        sizes = [outer.getmember(layer).size for layer in manifest["Layers"]]
    return "sha256:" + Path(manifest["Config"]).stem, config, sizes


def _extract(archive: tarfile.TarFile, name: str) -> Any:
    content = archive.extractfile(name)
    assert content is not None, name
    return content


@pytest.fixture(scope="module")
def built() -> Built:
    if shutil.which("buildah") is None or os.geteuid() != 0:
        _missing("the image tests need buildah, as root (`make cluster` installs it)")
    image_dir = Path(images_sh('echo "${IMAGE_DIR}"'))
    archive = image_dir / f"nsq-operator-{images_sh('project_source_key')}.tar"
    if not archive.is_file() or (image_dir / "nsq-operator-current.tar").resolve() != archive:
        _missing(f"images.sh has not built this tree's image ({archive.name}): `make cluster` builds it")
    image_id, config, layer_sizes = read_archive(archive)
    return Built(archive, archive.with_suffix(".spdx.json"), image_id, config, layer_sizes)


@pytest.fixture(scope="module")
def rebuilt(built: Built) -> Iterator[str]:
    """The image built again from the same tree, as images.sh builds it: its ID."""
    if os.environ.get("NSQ_REQUIRE_CLUSTER") != "1":
        # half a minute of `make test`'s budget; `make test-cluster` builds this tree and
        # then always runs these
        pytest.skip("the second build runs under `make test-cluster`")
    started = time.monotonic()
    images_sh(f"build_project_image {REBUILT}")
    print(f"\nsecond build of the image: {time.monotonic() - started:.0f} s")
    done = subprocess.run(["buildah", "images", "--no-trunc", "--quiet", REBUILT], capture_output=True, text=True,
                          check=True)
    yield done.stdout.split()[0]
    subprocess.run(["buildah", "rmi", REBUILT], capture_output=True, check=False)


def test_a_second_build_of_the_tree_is_the_same_image(built: Built, rebuilt: str) -> None:
    inspected = subprocess.run(["buildah", "inspect", "--type", "image", REBUILT], capture_output=True, text=True,
                               check=True)
    diff_ids = json.loads(inspected.stdout)["OCIv1"]["rootfs"]["diff_ids"]
    assert diff_ids == built.config["rootfs"]["diff_ids"], "the layers differ"
    assert rebuilt == built.image_id


def test_it_runs_as_65532_with_nsq_operator_as_its_command(built: Built, rebuilt: str) -> None:
    config = built.config["config"]
    assert config["User"] == "65532:65532" and config["Cmd"] == ["nsq-operator"] and not config.get("Entrypoint")
    assert config["WorkingDir"] == "/data"
    container = subprocess.run(["buildah", "from", rebuilt], capture_output=True, text=True, check=True).stdout.strip()
    try:
        # through images.sh: buildah runs the container with the OCI runtime it chooses there
        ran = images_sh(f"buildah run {container} -- sh -c "
                        "'id -u; id -g; stat -c %u /data; nsq-operator --version; nsqd --version'").splitlines()
    finally:
        subprocess.run(["buildah", "rm", container], capture_output=True, check=False)
    assert ran[:3] == ["65532", "65532", "65532"]
    version = project_image().rsplit(":", 1)[1]
    assert ran[3].startswith(f"nsq-operator v{version} ") and ran[4].startswith(f"nsqd v1.3.0 (nsq-operator v{version}")


def test_its_size_is_the_project_and_its_dependencies(built: Built) -> None:
    base, *project = built.layer_sizes
    mib = 1024 * 1024
    print(f"\nimage archive {built.archive.stat().st_size / mib:.1f} MiB: base layer {base / mib:.1f} MiB, "
          f"the project's layers {sum(project) / mib:.1f} MiB")
    assert project and sum(project) < PROJECT_LAYERS_CEILING


def sbom_packages(sbom: Path) -> list[dict[str, Any]]:
    document = json.loads(sbom.read_text(encoding="utf-8"))
    assert document["spdxVersion"] == "SPDX-2.3"
    return list(document["packages"])


def pinned() -> dict[str, str]:
    lines = (REPO / "image-constraints.txt").read_text(encoding="utf-8").splitlines()
    return dict(line.split("==") for line in lines if line and not line.startswith("#"))


def test_the_sbom_lists_the_project_its_pins_and_the_base(built: Built) -> None:
    packages = sbom_packages(built.sbom)
    assert packages[0]["versionInfo"] == built.image_id, "the SBOM is of another image"
    purls = [ref["referenceLocator"] for p in packages[1:] for ref in p["externalRefs"]]
    installed = {purl.removeprefix("pkg:pypi/"): p for purl, p in zip(purls, packages[1:])
                 if purl.startswith("pkg:pypi/") and "/opt/nsq-operator/" in p["sourceInfo"]}
    version = project_image().rsplit(":", 1)[1]
    want = {f"{name}@{v}" for name, v in pinned().items() if name not in ("setuptools", "wheel")}
    # the project at the one version, its dependencies at image-constraints.txt's, nothing else
    assert set(installed) == want | {f"nsq-operator@{version}"}
    assert [p for p in purls if p.startswith("pkg:pypi/nsq-operator@")] == [f"pkg:pypi/nsq-operator@{version}"]
    debs = {p["name"]: p["versionInfo"] for p, purl in zip(packages[1:], purls) if purl.startswith("pkg:deb/debian/")}
    assert debs["python3"].startswith("3.11.") and debs["libc6"] and "python3-pip" in debs
    print(f"\nSBOM: {len(debs)} Debian packages, {len(purls) - len(debs)} Python packages, "
          f"{len(installed)} of them the project's")
