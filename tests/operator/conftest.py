"""The operator under test: emulator + test kubelet + kopf, one per test module (starting
real processes is the slow part, so a module's tests share them and use their own
object names)."""
from __future__ import annotations

from typing import AsyncIterator

import pytest
import pytest_asyncio

from tests.operator.harness import Backstage, OperatorUnderTest

NAMESPACE = "nsq-test"


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def operator(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[OperatorUnderTest]:
    backstage = Backstage(tmp_path_factory.mktemp("pods"), NAMESPACE).start()
    running = OperatorUnderTest(backstage, NAMESPACE)
    try:
        await running.start()
        yield running
    finally:
        await running.stop()
        backstage.stop()
