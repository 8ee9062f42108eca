"""Closing the lookupd poller ends its task even when a recheck (a lost connection) wakes
the poller in the same moment. Python 3.11's ``asyncio.wait_for`` returns instead of
raising when the cancellation and the wake-up meet, which left the poller looping and
``close()`` (so ``Consumer.stop()``) waiting forever."""
from __future__ import annotations

import asyncio

import pytest

from nsq_client import Config
from nsq_client.lookup import LookupdPoller


@pytest.mark.parametrize("yields_between", range(5))
async def test_close_right_after_a_recheck_ends_the_poller(yields_between: int) -> None:
    rounds = 0

    def on_nodes(_: object) -> None:
        raise AssertionError("no lookupd is configured: no round can answer")

    poller = LookupdPoller(Config(lookupd_poll_interval=60), discover=lambda admin: asyncio.sleep(0, []),
                           on_nodes=on_nodes)
    original_poll = poller.poll

    async def counting_poll():  # type: ignore[no-untyped-def]
        nonlocal rounds
        rounds += 1
        return await original_poll()

    poller.poll = counting_poll  # type: ignore[method-assign]
    poller.start()
    async with asyncio.timeout(5):
        while rounds == 0:
            await asyncio.sleep(0)
    for _ in range(3):
        await asyncio.sleep(0)  # now waiting for the interval or a recheck
    poller.recheck()
    for _ in range(yields_between):
        await asyncio.sleep(0)
    async with asyncio.timeout(5):
        await poller.close()
