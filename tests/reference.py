"""Go NSQ v1.3.0 as the reference the same tests run against.

``NSQD_REF`` / ``NSQLOOKUPD_REF`` name the Go binaries; unset, they default to the copies
in ``../shared/nsq-v1.3.0/bin/`` beside the repository, so CI runs every ``nsqd_ref`` test
wherever that folder is present and skips them (saying why) where it is not. Setting a
variable to an empty string turns that reference off.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.servers import Nsqd, Nsqlookupd

SHARED_BIN = Path(__file__).resolve().parents[1].parent / "shared" / "nsq-v1.3.0" / "bin"


def _reference(variable: str, program: str) -> str:
    if variable in os.environ:
        return os.environ[variable]
    default = SHARED_BIN / program
    return str(default) if default.is_file() else ""


NSQD_REF = _reference("NSQD_REF", "nsqd")
NSQLOOKUPD_REF = _reference("NSQLOOKUPD_REF", "nsqlookupd")

# a test taking a fixture parametrized with these runs once against each
FLAVOURS = ["ours", pytest.param("go", marks=pytest.mark.nsqd_ref)]


def skip_unless_present(binary: str, variable: str) -> None:
    if not binary:
        pytest.skip(f"{variable} is unset and {SHARED_BIN} is absent: no Go NSQ v1.3.0 to compare with")
    if not Path(binary).is_file():
        pytest.skip(f"{variable}={binary} is not a file")


def flavour_or_skip(param: str) -> str:
    """``param`` as given; a skip when it is "go" and no Go nsqd is present."""
    if param == "go":
        skip_unless_present(NSQD_REF, "NSQD_REF")
    return param


class GoNsqdBinary:
    """Mixed in before an Nsqd class (plain, TLS ...): the same flags, Go's binary."""

    def argv(self) -> list[str]:
        args: list[str] = super().argv()  # type: ignore[misc]
        # Go's nsqd locks its data path and does not create it
        for arg in args:
            if arg.startswith("--data-path="):
                Path(arg.split("=", 1)[1]).mkdir(parents=True, exist_ok=True)
        return [NSQD_REF, *args[1:]]


class GoNsqd(GoNsqdBinary, Nsqd):
    """The reference nsqd, started with the same flags as ours."""


class GoNsqlookupd(Nsqlookupd):
    """The reference nsqlookupd, started with the same flags as ours."""

    def argv(self) -> list[str]:
        return [NSQLOOKUPD_REF, *super().argv()[1:]]
