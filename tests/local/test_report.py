"""The demo's verdict and its text: a loss, an unclean drain or an error fails it."""
from __future__ import annotations

from nsq_local.ledger import Ledger
from nsq_local.report import Report, render
from nsq_local.rolling import NodeRestart


def _report(lose: bool, exit_code: int | None = 0) -> Report:
    ledger = Ledger(["orders"], ["archive"], run="r", first_phase="before", now=0.0)
    ids = ledger.new_ids("orders", 3)
    ledger.acknowledged("orders", ids)
    for mid in ids[:2] if lose else ids + ids[:1]:
        ledger.delivered("orders", "archive", mid, "127.0.0.1:4150")
    restarts = [NodeRestart("nsqd-0", "POST /drain", 0.25, exit_code, 1.5, 42)]
    return Report(tally=ledger.tally(now=2.0), restarts=restarts, nsqds=1, lookupds=2, all_delivered=not lose,
                  node_names={"127.0.0.1:4150": "nsqd-0"})


def test_nothing_lost_and_clean_drains_is_ok_and_says_so() -> None:
    report = _report(lose=False)
    text = render(report)
    assert report.ok
    assert "lost          0" in text and "duplicates    1" in text
    assert text.splitlines()[-1] == "OK: 0 acknowledged messages lost, 1 duplicates delivered"
    assert "nsqd-0  POST /drain             42       0.25s       1.50s          0" in text
    assert "before      2.0            2            2" in text


def test_a_lost_message_fails_the_report() -> None:
    report = _report(lose=True)
    assert not report.ok
    assert "not delivered before the deadline" in render(report)
    assert render(report).splitlines()[-1].startswith("FAILED: 1 acknowledged messages lost")


def test_a_node_killed_after_its_drain_fails_the_report() -> None:
    report = _report(lose=False, exit_code=None)
    assert not report.ok
    assert "killed" in render(report)
