"""A rolling restart of a local cluster (2 nsqlookupds, 3 nsqds, real processes) under
continuous load from our producer pool and consumers: every acknowledged message reaches
every channel, duplicates are counted and reported, each node is drained, exits 0 and
comes back on its own data directory holding the backlog it had."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from nsq_local.demo import run_demo
from nsq_local.options import ClusterOptions, DemoOptions, LoadOptions
from nsq_local.report import render
from nsq_local.rolling import DRAIN_BY_HTTP, DRAIN_BY_SIGTERM
from tests.servers import http

pytestmark = pytest.mark.slow


@pytest.mark.timeout(90)
@pytest.mark.parametrize("drain_by, drained_by", [("http", DRAIN_BY_HTTP), ("sigterm", DRAIN_BY_SIGTERM)])
async def test_rolling_restart_under_load_loses_no_acknowledged_message(
        tmp_path: Path, drain_by: str, drained_by: str) -> None:
    options = DemoOptions(
        cluster=ClusterOptions(workdir=tmp_path, admin=True),
        # the slow channel keeps a backlog on every nsqd, which only its own disk can bring back
        load=LoadOptions(rate=300, slow_channel="archive", slow_share=0.7),
        before=1.5, after=1.5, settle_timeout=30, exit_timeout=30, drain_by=drain_by)

    said: list[str] = []
    report = await run_demo(options, progress=said.append)
    text = render(report)
    tally = report.tally
    admin_url = next(line.split()[1] for line in said if line.startswith("nsqadmin: "))
    with pytest.raises(OSError):  # the demo's nsqadmin stopped with its cluster
        http("GET", admin_url + "ping", timeout=1)

    assert report.errors == [], text
    assert [(r.name, r.drained_by, r.exit_code) for r in report.restarts] == [
        (f"nsqd-{i}", drained_by, 0) for i in range(3)], text
    assert all(r.held > 0 for r in report.restarts), text
    phases = {p.name: p for p in tally.phases}
    assert all(phases[name].acknowledged > 0 for name in ("before", "during", "after")), text
    assert tally.acknowledged > 0 and tally.published == tally.acknowledged + tally.failed
    assert tally.lost == 0, text
    assert [(c.topic, c.channel, c.lost) for c in tally.channels] == [
        (t, c, 0) for t in ("orders", "clicks") for c in ("archive", "alerts")], text
    assert all(c.delivered == c.acknowledged + c.failed_but_delivered for c in tally.channels), text
    assert tally.unknown == 0
    assert tally.duplicates == sum(c.deliveries - c.delivered for c in tally.channels)
    assert f"duplicates    {tally.duplicates}" in text
    # consumers and producers came back to every restarted node
    assert set(tally.deliveries_by_node["after"]) == set(report.node_names), text
    assert report.ok, text


@pytest.mark.timeout(60)
def test_up_runs_a_cluster_until_interrupted_and_stops_every_node(tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-m", "nsq_local.cli", "up", "--workdir", str(tmp_path)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        assert proc.stdout is not None
        lines: list[str] = []
        while not lines or lines[-1] != "Ctrl-C stops it":
            line = proc.stdout.readline().decode()
            assert line, f"exit {proc.wait()}: {lines}"
            lines.append(line.strip())
        nodes = {words[0]: words[4] for words in (line.split() for line in lines) if len(words) == 5
                 and words[1] == "TCP"}
        assert sorted(nodes) == ["nsqd-0", "nsqd-1", "nsqd-2", "nsqlookupd-0", "nsqlookupd-1"], lines
        admin_url = next(line.split()[1] for line in lines if line.startswith("nsqadmin: "))
        status, body = http("GET", admin_url + "api/nodes")
        assert status == 200 and len(json.loads(body)["nodes"]) == 3, body
        for http_address in nodes.values():
            assert http("GET", f"http://{http_address}/ping")[0] == 200
        assert {p["tcp_port"] for p in _lookupd_nodes(nodes["nsqlookupd-0"])} == {
            int(line.split()[2].rsplit(":", 1)[1]) for line in lines if line.startswith("nsqd-")}

        os.killpg(proc.pid, signal.SIGINT)
        out, _ = proc.communicate(timeout=40)
        assert proc.returncode == 0, out
        assert "stopped: " in out.decode() and out.decode().count("exit 0") == 6, out
        for http_address in nodes.values():
            with pytest.raises(OSError):
                http("GET", f"http://{http_address}/ping", timeout=1)
        assert (tmp_path / "nsqd-2" / "data").is_dir()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def _lookupd_nodes(http_address: str) -> list[dict]:
    status, body = http("GET", f"http://{http_address}/nodes")
    assert status == 200
    return json.loads(body)["producers"]
