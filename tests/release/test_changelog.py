"""CHANGELOG.md in Keep a Changelog's shape, pointing at the upgrade notes, and the release
docs: every file they link to exists."""
from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]
CHANGELOG = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
KINDS = {"Added", "Changed", "Deprecated", "Removed", "Fixed", "Security", "Upgrade notes"}


def test_the_changelog_keeps_a_changelog() -> None:
    assert CHANGELOG.startswith("# Changelog\n") and "keepachangelog.com" in CHANGELOG
    releases = re.findall(r"^## \[([^\]]+)\](.*)$", CHANGELOG, re.M)
    assert releases and releases[0] == ("Unreleased", ""), "the newest section is Unreleased"
    for name, rest in releases[1:]:
        assert re.fullmatch(r"\d+\.\d+\.\d+", name) and re.fullmatch(r" - \d{4}-\d\d-\d\d", rest), (name, rest)
    assert all(kind in KINDS for kind in re.findall(r"^### (.+)$", CHANGELOG, re.M))
    released = [name for name, _ in releases[1:]]
    # the package's version is either released (its section) or the one being prepared
    assert not released or released[0] == VERSION or VERSION not in released


def test_the_changelog_says_crds_first_and_points_at_the_upgrade_notes() -> None:
    head = CHANGELOG.split("## [", 1)[0]
    assert "CRDs first" in head and "(operator/UPGRADING.md)" in head


def test_links_of_the_release_docs_resolve() -> None:
    for doc in (ROOT / "CHANGELOG.md", ROOT / "docs" / "releasing.md"):
        for target in re.findall(r"\]\(([^)#]+)\)", doc.read_text(encoding="utf-8")):
            if "://" not in target:
                assert (doc.parent / target).exists(), f"{doc.name}: {target}"
        for path in re.findall(r"`((?:\.github|\.ci|charts|crds|docs|operator|tests)/[^`\s]*)`", doc.read_text(encoding="utf-8")):
            path = path.replace("X.Y.Z", VERSION).split("::")[0]
            assert list(ROOT.glob(path)), f"{doc.name}: {path}"
