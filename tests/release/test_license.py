"""The LICENSE file (MIT, as the metadata says) travels in what users install: the wheel's
``.dist-info/licenses`` and the sdist, each with PEP 639's metadata naming it.

Both are built by the build backend pyproject.toml names (tests/release/build_backend.py).
This is the repository's own pyproject.toml, the developer's install; the distributions
users install are held to the same in tests/release/test_distributions.py.
"""
from __future__ import annotations

import shutil
import subprocess
import tarfile
import tomllib
import zipfile
from pathlib import Path

import pytest

from tests.release.build_backend import backend, built as built_file, start_hook

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
PROJECT = PYPROJECT["project"]


def test_the_license_is_mit_for_the_nsq_operator_authors() -> None:
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert PROJECT["license"] == "MIT" and PROJECT["license-files"] == ["LICENSE"]
    assert text.startswith("MIT License\n\nCopyright (c) ") and "the nsq-operator authors" in text.splitlines()[2]
    assert "Permission is hereby granted, free of charge" in text


def source_tree(target: Path) -> Path:
    """The files a build reads (the repository's, tracked or new, less what git ignores)."""
    where = PYPROJECT["tool"]["setuptools"]["packages"]["find"]["where"]
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "--", "pyproject.toml", "README.md",
                             *PROJECT["license-files"], *where], cwd=ROOT, capture_output=True, text=True, check=True)
    for name in listed.stdout.splitlines():
        if (ROOT / name).is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, target / name)
    return target


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(wheel, sdist) of the project."""
    tmp = tmp_path_factory.mktemp("build")
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs the git checkout to list the sources")
    backend_dir, out = backend(PYPROJECT["build-system"]["requires"]), tmp / "dist"
    src = source_tree(tmp / "src")
    sdist = built_file(start_hook("build_sdist", src, out, backend_dir), out)
    wheel = built_file(start_hook("build_wheel", src, out, backend_dir), out)
    return wheel, sdist


def test_the_development_wheel_holds_the_import_packages_only(built: tuple[Path, Path]) -> None:
    """Nothing else at the top of site-packages: the component folders also hold
    examples and screenshots, which a namespace-package search would install."""
    wheel, _ = built
    with zipfile.ZipFile(wheel) as archive:
        tops = {name.split("/")[0] for name in archive.namelist() if not name.split("/")[0].endswith(".dist-info")}
    assert tops == {"nsq_protocol", "nsqd", "nsqlookupd", "nsqadmin", "nsq_client", "nsq_local", "nsq_operator",
                    "nsq_spark"}


def test_the_wheel_carries_the_license(built: tuple[Path, Path]) -> None:
    wheel, _ = built
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        [meta] = [n for n in names if n.endswith(".dist-info/METADATA")]
        metadata = archive.read(meta).decode()
        [license_file] = [n for n in names if n.endswith(".dist-info/licenses/LICENSE")]
        assert archive.read(license_file) == (ROOT / "LICENSE").read_bytes()
    assert "License-Expression: MIT" in metadata.splitlines()
    assert "License-File: LICENSE" in metadata.splitlines()
    assert f"Version: {PROJECT['version']}" in metadata.splitlines()


def test_the_sdist_carries_the_license(built: tuple[Path, Path]) -> None:
    _, sdist = built
    top = f"nsq_operator-{PROJECT['version']}"
    assert sdist.name == f"{top}.tar.gz"
    with tarfile.open(sdist) as archive:
        license_member = archive.extractfile(f"{top}/LICENSE")
        assert license_member is not None and license_member.read() == (ROOT / "LICENSE").read_bytes()
        pkg_info = archive.extractfile(f"{top}/PKG-INFO")
        assert pkg_info is not None
        lines = pkg_info.read().decode().splitlines()
    assert "License-Expression: MIT" in lines and "License-File: LICENSE" in lines
