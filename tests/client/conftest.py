"""Fixtures for the client's tests: nsqd processes of either flavour, unique topics.

Every test that takes ``start_nsqd`` or ``shared_nsqd`` runs twice: against our nsqd and
against Go's nsqd v1.3.0 (``tests/reference.py``: ``NSQD_REF``, by default the copy in
``../shared/nsq-v1.3.0/bin``; that run is marked ``nsqd_ref`` and skipped, with the
reason, where no Go nsqd is present).
"""
from __future__ import annotations

import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

import pytest

from tests.conftest import Servers
from tests.reference import FLAVOURS, GoNsqd, flavour_or_skip
from tests.servers import Nsqd


StartNsqd = Callable[..., Nsqd]


def nsqd_starter(servers: Servers, flavour: str) -> StartNsqd:
    kind = Nsqd if flavour == "ours" else GoNsqd
    return lambda **flags: servers.nsqd(kind=kind, **flags)


@pytest.fixture(params=FLAVOURS)
def flavour(request: pytest.FixtureRequest) -> str:
    """Which nsqd the test runs against: "ours" or "go" (NSQD_REF)."""
    return flavour_or_skip(request.param)


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
    return flavour_or_skip(request.param)


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
