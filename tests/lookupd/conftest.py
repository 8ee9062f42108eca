"""Fixtures that run our nsqlookupd as a real process on 127.0.0.1 (harness: tests/servers.py).

Every lookupd here binds port 0 and the harness reads the real ports from its log, so
no port can be taken between choosing it and binding it."""
from __future__ import annotations

import uuid
from typing import Callable

import pytest

from tests.conftest import Servers
from tests.servers import Nsqlookupd

StartLookupd = Callable[..., Nsqlookupd]  # flags as keywords: inactive_producer_timeout="1s"


@pytest.fixture
def start_lookupd(servers: Servers) -> StartLookupd:
    """Starts nsqlookupd processes with extra flags; every one is stopped after the test."""
    def start(**flags: object) -> Nsqlookupd:
        return servers.lookupd(tcp_port=0, http_port=0, **flags)
    return start


@pytest.fixture(scope="module")
def lookupd(module_servers: Servers) -> Nsqlookupd:
    """One nsqlookupd with default flags, shared by a module's tests (use unique topics)."""
    return module_servers.lookupd(tcp_port=0, http_port=0)


@pytest.fixture
def topic() -> str:
    return f"topic-{uuid.uuid4().hex[:10]}"
