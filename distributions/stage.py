"""Lays out the source tree of each distribution users install, ready for any build
frontend (``python -m build <tree>``)::

    python distributions/stage.py build/staged                # all of them
    python distributions/stage.py build/staged nsq-client     # some

A tree holds the distribution's ``pyproject.toml`` (from ``distributions/<name>/``), its
``README.md``, the repository's ``LICENSE`` and the import packages its
``[tool.setuptools.packages.find] include`` names, copied from the component folders the
repository's ``pyproject.toml`` lists. Staging writes the one version (the repository's
``project.version``) into the tree's ``pyproject.toml`` and pins the sibling distributions
it requires to that version, so every release is one set of wheels that fit together.
The sdist built from a tree holds everything its wheel is built from.
"""
from __future__ import annotations

import re
import shutil
import sys
import tomllib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
HERE = ROOT / "distributions"
DYNAMIC_VERSION = 'dynamic = ["version"]\n'


def names() -> list[str]:
    """Every distribution: a folder here with a pyproject.toml."""
    return sorted(p.parent.name for p in HERE.glob("*/pyproject.toml"))


def root_project() -> dict[str, Any]:
    return dict(tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8")))


def versioned(text: str, version: str, siblings: list[str]) -> str:
    """The distribution's pyproject.toml with the version written in and every sibling it
    requires (a requirement naming one with no version of its own) pinned to it."""
    if text.count(DYNAMIC_VERSION) != 1:
        raise ValueError(f"expected one line {DYNAMIC_VERSION!r}: staging writes the version there")
    text = text.replace(DYNAMIC_VERSION, f'version = "{version}"\n')
    sibling = "|".join(re.escape(s) for s in siblings)
    return re.sub(rf'^(\s*)"((?:{sibling})(?:\[[\w,\s-]*\])?)"', rf'\1"\2=={version}"', text, flags=re.M)


def source_dirs(project: dict[str, Any]) -> list[Path]:
    return [ROOT / where for where in project["tool"]["setuptools"]["packages"]["find"]["where"]]


def package_dir(name: str, sources: list[Path]) -> Path:
    found = [d / name for d in sources if (d / name / "__init__.py").is_file()]
    if len(found) != 1:
        raise LookupError(f"import package {name}: found in {found or 'no component folder'}")
    return found[0]


def stage(name: str, target: Path) -> Path:
    """The source tree of distribution ``name`` at ``target`` (replaced if present)."""
    root = root_project()
    version = root["project"]["version"]
    text = versioned((HERE / name / "pyproject.toml").read_text(encoding="utf-8"), version, names())
    pyproject = tomllib.loads(text)
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    (target / "pyproject.toml").write_text(text, encoding="utf-8")
    shutil.copy2(HERE / name / "README.md", target / "README.md")
    for license_file in pyproject["project"]["license-files"]:
        shutil.copy2(ROOT / license_file, target / license_file)
    sources = source_dirs(root)
    tops = {p for p in pyproject["tool"]["setuptools"]["packages"]["find"]["include"] if "." not in p}
    for package in sorted(tops):
        shutil.copytree(package_dir(package, sources), target / package,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return target


def main(argv: list[str]) -> int:
    if not argv or argv[0].startswith("-"):
        print(__doc__, file=sys.stderr)
        return 2
    out, wanted = Path(argv[0]), argv[1:] or names()
    unknown = sorted(set(wanted) - set(names()))
    if unknown:
        print(f"stage.py: no distribution {', '.join(unknown)} (there are {', '.join(names())})", file=sys.stderr)
        return 2
    for name in wanted:
        print(stage(name, out / name))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
