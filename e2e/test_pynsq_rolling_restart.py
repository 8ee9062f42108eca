"""A rolling restart of a local cluster (2 nsqlookupds, 3 nsqds) under continuous load
consumed by pynsq Readers, a client that never sends CLS: each drain disconnects them
cleanly once their messages in flight are answered, they carry on with the other nsqds,
find the restarted nsqd again through lookupd, and every acknowledged message reaches
every channel; duplicates are counted and reported."""
from __future__ import annotations

from pathlib import Path

import pytest

from e2e.pynsq_consumers import PynsqConsumers
from nsq_local.demo import run_demo
from nsq_local.ledger import Ledger
from nsq_local.load import ConsumersFactory
from nsq_local.options import ClusterOptions, DemoOptions, LoadOptions
from nsq_local.report import render
from nsq_local.rolling import DRAIN_BY_HTTP
from nsq_local.waiting import NotReachedError, wait_until

pytestmark = pytest.mark.slow

TOPICS, CHANNELS = ["orders", "clicks"], ["archive", "alerts"]
# errors pynsq reports that mean an unclean end: an nsqd error frame (E_FIN_FAILED after
# a message was taken away, say) or a FIN/REQ written to a connection already closed
UNCLEAN_ERRORS = {"Error", "SendError"}
# pynsq dials an nsqd at most once every 10 s, so a Reader may rejoin a restarted nsqd
# some seconds after the first one did
REJOIN_TIMEOUT = 15.0


def not_rejoined(consumers: PynsqConsumers) -> set[tuple[str, str, str]]:
    """(nsqd, topic, channel) whose connection closed and did not open again since."""
    last: dict[tuple[str, str, str], str] = {}
    for event in sorted(consumers.events(), key=lambda e: e.at):
        if event.kind in ("connected", "closed"):
            last[(event.nsqd, event.topic, event.channel)] = event.kind
    return {key for key, kind in last.items() if kind == "closed"}


class RejoiningPynsqConsumers:
    """The load's pynsq Readers; before they are stopped, each is given a bounded time to
    connect again to every nsqd it lost to a drain (what the test then checks)."""

    def __init__(self, consumers: PynsqConsumers) -> None:
        self.consumers = consumers

    async def start(self) -> None:
        await self.consumers.start()

    def catch_up(self) -> None:
        self.consumers.catch_up()

    async def stop(self) -> int | None:
        async def rejoined() -> bool:
            return not not_rejoined(self.consumers)
        try:
            await wait_until(rejoined, REJOIN_TIMEOUT, "pynsq Readers back on every nsqd")
        except NotReachedError:
            pass  # the test says which connections did not come back
        return await self.consumers.stop()


def pynsq_consumers(workdir: Path, started: list[PynsqConsumers]) -> ConsumersFactory:
    """The load's consumers as pynsq Readers, one per channel of each topic."""
    def make(options: LoadOptions, ledger: Ledger, lookupds: list[str]) -> RejoiningPynsqConsumers:
        slow = {}
        if options.slow_channel is not None:
            # pynsq answers at most max_in_flight messages at a time: holding each this
            # long keeps up with slow_share of the rate
            seconds = options.max_in_flight / (options.slow_share * options.rate)
            slow = {(topic, options.slow_channel): seconds for topic in options.topics}
        consumers = PynsqConsumers(
            [(t, c) for t in options.topics for c in options.channels], lookupds, workdir,
            max_in_flight=options.max_in_flight, lookupd_poll_interval=max(1, round(options.lookupd_poll_interval)),
            handle_seconds=slow,
            on_delivery=lambda d: ledger.delivered(d.topic, d.channel, d.body, d.nsqd))
        started.append(consumers)
        return RejoiningPynsqConsumers(consumers)
    return make


@pytest.mark.timeout(90)
async def test_rolling_restart_with_pynsq_consumers_loses_no_acknowledged_message(tmp_path: Path) -> None:
    options = DemoOptions(
        cluster=ClusterOptions(workdir=tmp_path),
        load=LoadOptions(topics=TOPICS, channels=CHANNELS, rate=300, slow_channel="archive", slow_share=0.7),
        before=1.5, after=1.5, settle_timeout=30, exit_timeout=30, drain_by="http")
    started: list[PynsqConsumers] = []

    report = await run_demo(options, consumers=pynsq_consumers(tmp_path, started))
    text = render(report)
    [consumers] = started
    tally = report.tally

    assert report.errors == [], text
    assert [(r.name, r.drained_by, r.exit_code) for r in report.restarts] == [
        (f"nsqd-{i}", DRAIN_BY_HTTP, 0) for i in range(3)], text
    assert all(r.held > 0 for r in report.restarts), text
    assert tally.acknowledged > 0 and tally.lost == 0, text
    assert [(c.topic, c.channel, c.lost) for c in tally.channels] == [
        (t, c, 0) for t in TOPICS for c in CHANNELS], text
    assert tally.unknown == 0, text
    assert tally.duplicates == sum(c.deliveries - c.delivered for c in tally.channels)
    assert f"duplicates    {tally.duplicates}" in text
    assert len(consumers.deliveries()) == sum(c.deliveries for c in tally.channels)
    # pynsq came back to every restarted nsqd through lookupd
    assert set(tally.deliveries_by_node["after"]) == set(report.node_names), text

    # each drain closed every Reader's connection to that nsqd, and each Reader connected
    # to it again once it was back; nothing was answered on a closed connection
    subscriptions = {(t, c) for t in TOPICS for c in CHANNELS}
    for address in report.node_names:
        for kind in ("closed", "connected"):
            assert {(e.topic, e.channel) for e in consumers.events(kind) if e.nsqd == address} == subscriptions, (
                kind, address, consumers.describe())
    assert not_rejoined(consumers) == set(), consumers.describe()
    assert [e for e in consumers.events("error") if e.error_kind in UNCLEAN_ERRORS] == [], consumers.describe()
    assert report.ok, text
