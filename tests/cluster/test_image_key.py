"""images.sh keeps the project's image under a key of what it is built from, and builds it
stamped with the date of the last commit that changed those files. So the key must change
with that date too: the same files committed again later (a change and its revert) build
an image of another date, and a key of the files alone served the older archive as this
tree's (the second build then differed from it: ``test_image.py``)."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.cluster.test_image import images_sh


def git(repo: Path, *args: str, date: str = "2026-01-01T00:00:00Z") -> None:
    env = {**os.environ, "GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date, "GIT_AUTHOR_NAME": "t",
           "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"}
    subprocess.run(["git", "-C", str(repo), *args], env=env, check=True, capture_output=True)


def commit(repo: Path, path: str, text: str, date: str) -> None:
    (repo / path).parent.mkdir(parents=True, exist_ok=True)
    (repo / path).write_text(text)
    git(repo, "add", path)
    git(repo, "commit", "-q", "-m", path, date=date)


def key_and_date(repo: Path) -> tuple[str, str]:
    key, date = images_sh(f'REPO_DIR="{repo}" && project_source_key && project_source_date').split()
    return key, date


def test_the_image_key_follows_the_sources_and_the_date_they_stamp_the_image_with(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    commit(repo, "broker/nsqd.py", "one\n", "2026-01-01T00:00:00Z")
    first = key_and_date(repo)
    assert key_and_date(repo) == first

    commit(repo, "tests/test_x.py", "not copied into the image\n", "2026-01-02T00:00:00Z")
    assert key_and_date(repo) == first

    commit(repo, "broker/nsqd.py", "two\n", "2026-01-03T00:00:00Z")
    changed = key_and_date(repo)
    assert changed[0] != first[0]

    commit(repo, "broker/nsqd.py", "one\n", "2026-01-04T00:00:00Z")  # reverted: the files of the first
    reverted = key_and_date(repo)
    assert reverted[1] != first[1]  # stamped with the revert's date
    assert reverted[0] not in (first[0], changed[0]), "the revert's image got the first build's key"

    (repo / "broker" / "nsqd.py").write_text("not committed yet\n")
    assert key_and_date(repo)[0] != reverted[0]
