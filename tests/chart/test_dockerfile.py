"""The image, checked without a Docker engine: its base and user, what its build context
holds, that its build stage turns that context into a wheel with the nsqd, nsqlookupd and
nsq-operator commands and no Spark or test dependencies, installed into a venv without pip
at the versions image-constraints.txt pins (tests/cluster/test_image.py builds it)."""
from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

from nsq_operator.builders.pods import RUN_AS
from tests.chart.dockerfile import (DOCKERFILE, DOCKERIGNORE, IgnoreRule, Stage, context_files, ignore_rules,
                                    in_context, stages)
from tests.chart.render import ROOT, Helm, one

COMMANDS = {"nsqd", "nsqlookupd", "nsq-operator"}


def dockerfile() -> tuple[dict[str, str], list[Stage]]:
    return stages(DOCKERFILE.read_text(encoding="utf-8"))


def build_and_final() -> tuple[Stage, Stage]:
    _, found = dockerfile()
    assert len(found) == 2, "a build stage and the image"
    return found[0], found[1]


def copied_sources(build: Stage) -> list[str]:
    sources = []
    for copy in build.all("COPY"):
        words = [w for w in copy.words if not w.startswith("--")]
        sources += [w.rstrip("/") for w in words[:-1]]
    return sources


def test_the_image_is_python_311_slim_run_as_the_pods_user(helm: Helm) -> None:
    build, final = build_and_final()
    assert build.base == final.base == "python:3.11-slim"
    users = final.all("USER")
    assert users, "the image must not run as root"
    uid, _, gid = users[-1].arguments.partition(":")
    assert uid.isdigit() and int(uid) != 0  # numeric, so the kubelet can check runAsNonRoot
    assert int(uid) == RUN_AS  # the uid nsqd and nsqlookupd pods run as
    pod = one(helm.template(), "Deployment")["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsUser"] == int(uid)
    assert final.all("CMD")[-1].arguments == '["nsq-operator"]'


def test_the_image_installs_only_the_wheels_built_from_the_project() -> None:
    build, final = build_and_final()
    [run] = [run.arguments for run in build.all("RUN") if "pip wheel" in run.arguments]
    assert "pip wheel --wheel-dir /wheels ." in run
    # into a venv without pip, from the project's wheels only, no extras (neither spark nor test)
    assert "python -m venv --without-pip /opt/nsq-operator" in run
    assert "pip --python /opt/nsq-operator/bin/python install --no-compile --no-index --find-links=/wheels nsq-operator " in run
    assert "--invalidation-mode unchecked-hash /opt/nsq-operator" in run  # bytecode without timestamps
    assert "nsq-operator[" not in run
    # the image takes the venv alone: no pip runs in it, no wheel layer is left
    assert not [r for r in final.all("RUN") if "pip" in r.arguments]
    assert [c.arguments for c in final.all("COPY")] == ["--from=build /opt/nsq-operator /opt/nsq-operator"]
    [env] = [e.arguments for e in final.all("ENV") if "PATH=" in e.arguments]
    assert "PATH=/opt/nsq-operator/bin:" in env and "PYTHONDONTWRITEBYTECODE=1" in env


def test_every_dependency_is_pinned_for_the_image() -> None:
    from packaging.requirements import Requirement

    build, _ = build_and_final()
    assert any("PIP_CONSTRAINT=/src/image-constraints.txt" in e.arguments for e in build.all("ENV"))
    lines = (ROOT / "image-constraints.txt").read_text(encoding="utf-8").splitlines()
    pins = {Requirement(line).name.lower().replace("_", "-"): Requirement(line) for line in lines
            if line and not line.startswith("#")}
    assert all(str(pin.specifier).startswith("==") for pin in pins.values())
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    wanted = [Requirement(d) for d in project["project"]["dependencies"] + project["build-system"]["requires"]]
    for requirement in wanted:
        pin = pins[requirement.name.lower().replace("_", "-")]
        version = str(pin.specifier).removeprefix("==")
        assert requirement.specifier.contains(version), f"{pin} is outside pyproject.toml's {requirement}"


def test_the_build_copies_every_package_folder_and_only_the_context_holds_them() -> None:
    build, _ = build_and_final()
    where = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]["packages"]["find"]["where"]
    sources = copied_sources(build)
    license_files = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["license-files"]
    assert set(where) | {"pyproject.toml", "README.md", "image-constraints.txt", *license_files} == set(sources)
    files = context_files()
    for source in sources:
        assert any(f == source or f.startswith(source + "/") for f in files), f"{source} is not in the build context"
    stray = [f for f in files if not any(f == s or f.startswith(s + "/") for s in sources)]
    assert stray == [], "the context holds files the build never copies"
    assert not any("__pycache__" in f or f.endswith(".pyc") or ".egg-info" in f for f in files)


def test_dockerignore_follows_dockers_rules() -> None:
    rules = [IgnoreRule("*", False), IgnoreRule("src", True), IgnoreRule("**/__pycache__", False)]
    assert not in_context(".venv/bin/python", rules)
    assert in_context("src/pkg/mod.py", rules)
    assert not in_context("src/pkg/__pycache__/mod.cpython-311.pyc", rules)
    assert not in_context("README.md", rules)
    assert [r.pattern for r in ignore_rules("# comment\n\n!protocol/\n/abs\n")] == ["protocol", "abs"]


def test_the_build_stage_makes_a_wheel_with_the_three_commands(tmp_path: Path) -> None:
    build, _ = build_and_final()
    source, files = tmp_path / "src", context_files()
    for copy in build.all("COPY"):
        *sources, destination = [w for w in copy.words if not w.startswith("--")]
        for src in sources:
            src = src.rstrip("/")
            for f in files:
                if f == src:
                    target = source / destination / Path(f).name if destination.endswith("/") else source / destination
                elif f.startswith(src + "/"):
                    target = source / destination / f[len(src) + 1:]
                else:
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(ROOT / f, target)
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--disable-pip-version-check",
                           "--wheel-dir", str(tmp_path / "wheels"), str(source)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    [wheel] = (tmp_path / "wheels").glob("nsq_operator-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        info = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
        entry_points = archive.read(info).decode()
        meta = archive.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    for package in ("nsqd/cli.py", "nsqlookupd/cli.py", "nsq_operator/cli.py", "nsq_protocol/frames.py",
                    "nsq_client/__init__.py"):
        assert package in names
    scripts = {line.split("=")[0].strip() for line in entry_points.splitlines() if "=" in line}
    assert COMMANDS <= scripts
    # the image's package carries the license (PEP 639: the file and the metadata naming it)
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    assert "License-Expression: MIT" in meta and "License-File: LICENSE" in meta
    always = [line for line in meta.splitlines() if line.startswith("Requires-Dist:") and "extra ==" not in line]
    assert always and not [line for line in always if any(n in line.lower() for n in ("pyspark", "pytest", "pyarrow"))]


@pytest.mark.parametrize("path", [".venv/bin/python", ".git/HEAD", "tests/conftest.py", "charts/nsq-operator/Chart.yaml",
                                  "broker/nsqd/__pycache__/x.pyc", "nsq_operator.egg-info/PKG-INFO"])
def test_the_context_leaves_out(path: str) -> None:
    assert not in_context(path, ignore_rules(DOCKERIGNORE.read_text(encoding="utf-8")))
