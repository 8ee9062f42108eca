"""Fixtures for the client's tests: nsqd processes of either flavour, unique topics.

Every test that takes ``start_nsqd`` or ``shared_nsqd`` runs twice: against our nsqd and
against the Go nsqd named by ``NSQD_REF`` (that run is marked ``nsqd_ref`` and skipped,
with the reason, when NSQD_REF is unset).
"""
from __future__ import annotations

import itertools
import os
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable

import pytest

from tests.conftest import Servers
from tests.servers import Nsqd

NSQD_REF = os.environ.get("NSQD_REF", "")
FLAVOURS = ["ours", pytest.param("go", marks=pytest.mark.nsqd_ref)]
_numbers = itertools.count()


class GoNsqd(Nsqd):
    """The reference nsqd binary, started with the same flags as ours."""

    def argv(self) -> list[str]:
        return [NSQD_REF, *super().argv()[1:]]


StartNsqd = Callable[..., Nsqd]


def nsqd_starter(servers: Servers, flavour: str) -> StartNsqd:
    def start(**flags: Any) -> Nsqd:
        if flavour == "ours":
            return servers.nsqd(**flags)
        server = GoNsqd(servers.root / f"go-nsqd{next(_numbers)}", {k.replace("_", "-"): v for k, v in flags.items()})
        servers.started.append(server)
        return server.start()  # type: ignore[return-value]
    return start


def _flavour(param: str) -> str:
    if param == "go" and not NSQD_REF:
        pytest.skip("NSQD_REF is unset: point it at a Go nsqd v1.3.0 binary to run the client tests against it")
    if param == "go" and not Path(NSQD_REF).is_file():
        pytest.skip(f"NSQD_REF={NSQD_REF} is not a file")
    return param


@pytest.fixture(params=FLAVOURS)
def flavour(request: pytest.FixtureRequest) -> str:
    """Which nsqd the test runs against: "ours" or "go" (NSQD_REF)."""
    return _flavour(request.param)


@pytest.fixture
def start_nsqd(flavour: str, servers: Servers) -> StartNsqd:
    """Starts nsqds (stopped at teardown): ``start_nsqd(mem_queue_size=0)``."""
    return nsqd_starter(servers, flavour)


def start_many(start: StartNsqd, count: int, **flags: Any) -> list[Nsqd]:
    """``count`` nsqds started side by side (each start mostly waits for Python to import)."""
    with ThreadPoolExecutor(count) as pool:
        return list(pool.map(lambda _: start(**flags), range(count)))


@pytest.fixture(scope="module", params=FLAVOURS)
def module_flavour(request: pytest.FixtureRequest) -> str:
    return _flavour(request.param)


@pytest.fixture(scope="module")
def shared_nsqd(module_flavour: str, module_servers: Servers) -> Nsqd:
    """One nsqd with default flags for a module's tests; use the ``topic`` fixture."""
    return nsqd_starter(module_servers, module_flavour)()


@pytest.fixture(scope="module")
def nsqd_trio(module_flavour: str, module_servers: Servers) -> list[Nsqd]:
    """Three nsqds for a module's tests, each keeping every message on disk
    (``mem_queue_size=0``) so that one can be killed and restarted without losing any."""
    return start_many(nsqd_starter(module_servers, module_flavour), 3, mem_queue_size=0)


@pytest.fixture
def topic() -> str:
    return f"t-{uuid.uuid4().hex[:12]}"
