"""The run order's list names files that exist (a renamed file would silently lose its
place), and the order keeps each file's tests together and in their order."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

from tests.run_order import LONGEST_FIRST, longest_first

REPO = Path(__file__).resolve().parents[1]


def test_every_listed_file_exists() -> None:
    assert [p for p in LONGEST_FIRST if not (REPO / p).is_file()] == []
    assert len(set(LONGEST_FIRST)) == len(LONGEST_FIRST)


def test_listed_files_come_first_in_the_lists_order_and_the_rest_keep_theirs() -> None:
    first, second = LONGEST_FIRST[0], LONGEST_FIRST[1]
    ids = ["tests/a.py::x", f"{second}::p", "tests/a.py::y", f"{first}::q", f"{second}::r", "tests/b.py::z"]
    items: list[Any] = [SimpleNamespace(nodeid=i) for i in ids]
    assert [i.nodeid for i in longest_first(items)] == [
        f"{first}::q", f"{second}::p", f"{second}::r", "tests/a.py::x", "tests/a.py::y", "tests/b.py::z"]
