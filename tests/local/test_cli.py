"""``nsq-local demo`` exits 1 when the report fails (an acknowledged message lost), 0
when it passes; bad arguments are usage errors."""
from __future__ import annotations

from pathlib import Path

import pytest

from nsq_local import cli
from nsq_local.ledger import Ledger
from nsq_local.options import DemoOptions
from nsq_local.report import Report
from nsq_local.rolling import NodeRestart


def _fake_run(lost: bool, seen: list[DemoOptions]):  # type: ignore[no-untyped-def]
    async def run_demo(options: DemoOptions, progress: object = None) -> Report:
        seen.append(options)
        ledger = Ledger(["t"], ["c"], run="r")
        ids = ledger.new_ids("t", 2)
        ledger.acknowledged("t", ids)
        for mid in ids[:1] if lost else ids:
            ledger.delivered("t", "c", mid, "n")
        return Report(tally=ledger.tally(), restarts=[NodeRestart("nsqd-0", "SIGTERM", 0.1, 0, 1.0, 0)],
                      nsqds=1, lookupds=1, all_delivered=not lost)
    return run_demo


@pytest.mark.parametrize("lost, code", [(True, 1), (False, 0)])
def test_demo_exit_code_follows_the_report(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str], lost: bool, code: int) -> None:
    seen: list[DemoOptions] = []
    monkeypatch.setattr(cli, "run_demo", _fake_run(lost, seen))
    assert cli.main(["demo", "--workdir", str(tmp_path), "--nsqds", "1", "--topics", "t", "--channels", "c,d",
                     "--rate", "50", "--drain-by", "sigterm", "--nsqd-flag", "mem-queue-size=5"]) == code
    assert ("FAILED: 1 acknowledged" if lost else "OK: 0 acknowledged") in capsys.readouterr().out
    [options] = seen
    assert (options.cluster.nsqds, options.cluster.workdir, options.cluster.nsqd_flags) == (
        1, tmp_path, {"mem-queue-size": "5"})
    assert (options.load.topics, options.load.channels, options.load.slow_channel, options.load.rate) == (
        ["t"], ["c", "d"], "c", 50)
    assert options.drain_by == "sigterm"


@pytest.mark.parametrize("argv", [["demo", "--nsqd-flag", "no-value"], ["demo", "--channels", "a", "--slow-channel", "b"],
                                  ["up", "--nsqds", "0"], ["sideways"]])
def test_bad_arguments_are_usage_errors(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as exit:
        cli.main(argv)
    assert exit.value.code == 2
