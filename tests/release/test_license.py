"""The LICENSE file (MIT, as the metadata says) travels in what users install: the wheel's
``.dist-info/licenses`` and the sdist, each with PEP 639's metadata naming it.

Both are built by the build backend pyproject.toml names (setuptools>=77, the first with
``license-files``), installed into a folder of this test's own: the project's venv may
hold an older setuptools for its editable install, and pip's isolated build makes no sdist.
"""
from __future__ import annotations

import shutil
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from pathlib import Path

import pytest

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
    backend, out = tmp / "backend", tmp / "dist"
    requires = PYPROJECT["build-system"]["requires"]
    pip = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                          "--target", str(backend), *requires], capture_output=True, text=True, timeout=300)
    if pip.returncode != 0:
        pytest.skip(f"could not install the build backend {requires}: {pip.stderr[-500:]}")
    src = source_tree(tmp / "src")
    built = []
    for hook in ("build_sdist", "build_wheel"):  # a process each, as build frontends call them
        script = f"import sys; from setuptools import build_meta as b; print('built', b.{hook}(sys.argv[1]))"
        done = subprocess.run([sys.executable, "-c", script, str(out)], cwd=src, capture_output=True, text=True,
                              timeout=300, env={"PYTHONPATH": str(backend), "PATH": "/usr/bin:/bin"})
        assert done.returncode == 0, done.stderr[-3000:]
        built.append(done.stdout.splitlines()[-1].split()[1])  # the backend logs to stdout before
    sdist, wheel = built
    return out / wheel, out / sdist


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
