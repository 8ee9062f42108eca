"""The scale-down variant of the demo without processes: how nsqd's handoff state is read,
the report's verdict and text, and ``nsq-local demo --scale-down`` arguments."""
from __future__ import annotations

from pathlib import Path

import pytest

from nsq_local import cli
from nsq_local.ledger import Ledger
from nsq_local.options import DemoOptions
from nsq_local.report import Report, render
from nsq_local.scaling import HandoffState, NodeScaleDown


def test_handoff_state_reads_nsqds_drain_answer() -> None:
    drain = {"draining": True, "handoff": {
        "targets": ["127.0.0.1:4151", "127.0.0.1:4251"], "finished": True, "error": None,
        "topics": {"orders": 40, "clicks": 2}, "messages": 42, "topics_left": [], "messages_left": 0}}
    assert HandoffState.of(drain) == HandoffState(finished=True, error="", messages=42, topics=2,
                                                  targets=("127.0.0.1:4151", "127.0.0.1:4251"))
    failed = {"handoff": {"targets": ["a:1"], "finished": True, "error": "topic t: a:1 unreachable",
                          "topics": {}, "messages": 0, "topics_left": ["t"], "messages_left": 3}}
    assert HandoffState.of(failed) == HandoffState(True, "topic t: a:1 unreachable", 0, 0, ("a:1",), 3)
    assert HandoffState.of({"draining": True, "handoff": None}) is None


def _report(scale_downs: list[NodeScaleDown], errors: list[str] | None = None) -> Report:
    ledger = Ledger(["orders"], ["archive", "alerts"], run="r", first_phase="before", now=0.0)
    ids = ledger.new_ids("orders", 2)
    ledger.acknowledged("orders", ids)
    for channel in ("archive", "alerts"):
        for mid in ids:
            ledger.delivered("orders", channel, mid, "127.0.0.1:4150")
    ledger.delivered("orders", "alerts", ids[0], "127.0.0.1:4150")  # handed off after alerts had it
    return Report(tally=ledger.tally(now=2.0), restarts=[], nsqds=3, lookupds=2, all_delivered=True,
                  errors=errors or [], node_names={"127.0.0.1:4150": "nsqd-0"},
                  scale_downs=scale_downs, planned_scale_downs=1)


GONE = NodeScaleDown("nsqd-2", ("nsqd-0", "nsqd-1"), held=7, handed_off=5, topics=1, handoff_seconds=0.5,
                     stop_seconds=0.25, exit_code=0)


def test_a_clean_scale_down_without_loss_is_ok_and_reports_the_handoff() -> None:
    report = _report([GONE])
    text = render(report)
    assert report.ok, text
    assert text.startswith("Scale-down of 1 of 3 nsqds (with 2 nsqlookupds) under load")
    assert "nsqd-2  nsqd-0,nsqd-1              7           5       1         0.50s      0.25s          0" in text
    assert "duplicates    1" in text
    assert text.splitlines()[-1] == "OK: 0 acknowledged messages lost, 1 duplicates delivered"


@pytest.mark.parametrize("scale_downs, errors", [
    ([], ["nsqd-2: handoff failed after 0 messages: no target; scale-down stopped, nsqd-2 kept running"]),
    ([NodeScaleDown("nsqd-2", ("nsqd-0",), 7, 7, 1, 0.5, 30.0, None)], []),
])
def test_a_failed_handoff_or_a_killed_node_fails_the_report(scale_downs: list[NodeScaleDown],
                                                            errors: list[str]) -> None:
    report = _report(scale_downs, errors)
    assert not report.ok
    assert render(report).splitlines()[-1].startswith("FAILED")


def test_demo_scale_down_argument(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    seen: list[DemoOptions] = []

    async def run_demo(options: DemoOptions, progress: object = None) -> Report:
        seen.append(options)
        return _report([GONE])
    monkeypatch.setattr(cli, "run_demo", run_demo)
    assert cli.main(["demo", "--workdir", str(tmp_path), "--scale-down"]) == 0
    assert cli.main(["demo", "--workdir", str(tmp_path), "--scale-down", "2", "--handoff-timeout", "9"]) == 0
    assert cli.main(["demo", "--workdir", str(tmp_path)]) == 0
    assert [(o.scale_down, o.handoff_timeout) for o in seen] == [(1, 60.0), (2, 9.0), (0, 60.0)]


def test_scaling_down_every_nsqd_is_a_usage_error() -> None:
    with pytest.raises(SystemExit) as exit:
        cli.main(["demo", "--nsqds", "2", "--scale-down", "2"])
    assert exit.value.code == 2
