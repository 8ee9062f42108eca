"""``python -m nsq_local.kubeload``, the load program the kind scenario runs as a Job:
against real nsqds and a lookupd it publishes until told to stop, counts every message ID
on every channel and ends with a ``RESULT`` line and exit 0 only when nothing
acknowledged was lost."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from nsq_local.kubeload import RESULT_PREFIX
from tests.conftest import Servers
from tests.servers import Nsqd, wait_for

TOPICS = ["orders", "clicks"]
CHANNELS = ["billing", "archive"]


def _command(*args: str) -> list[str]:
    return [sys.executable, "-m", "nsq_local.kubeload", *args]


def _result(output: str) -> dict[str, Any]:
    lines = [line for line in output.splitlines() if line.startswith(RESULT_PREFIX)]
    assert len(lines) == 1, output
    result: dict[str, Any] = json.loads(lines[0][len(RESULT_PREFIX):])
    return result


def _with_channels(nsqd: Nsqd) -> Nsqd:
    """Topics and channels declared up front, as the operator does for NsqTopic/NsqChannel."""
    for topic in TOPICS:
        assert nsqd.post(f"/topic/create?topic={topic}").status == 200
        for channel in CHANNELS:
            assert nsqd.post(f"/channel/create?topic={topic}&channel={channel}").status == 200
    return nsqd


def received(nsqd: Nsqd) -> int:
    return sum((nsqd.topic(t) or {}).get("message_count", 0) for t in TOPICS)


@pytest.mark.timeout(60)
def test_load_until_the_stop_file_then_every_acknowledged_message_counted(servers: Servers, tmp_path: Path) -> None:
    lookupd = servers.lookupd()
    nsqds = [_with_channels(servers.nsqd(lookupd_tcp_address=lookupd.tcp_address)) for _ in range(2)]
    stop_file = tmp_path / "stop"
    args = [f"--lookupd-http-address={lookupd.http_address}", "--rate=300", "--batch=5", "--verbose",
            f"--stop-file={stop_file}", "--settle-timeout=20"]
    args += [f"--nsqd-tcp-address={n.tcp_address}" for n in nsqds]
    args += [f"--topic={t}" for t in TOPICS] + [f"--channel={c}" for c in CHANNELS]
    proc = subprocess.Popen(_command(*args), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        # it keeps publishing until the file exists: both nsqds keep receiving (which topic
        # goes where is the pool's round robin over publishes of every topic)
        try:
            wait_for(lambda: all(received(n) > 100 for n in nsqds), timeout=20)
        except AssertionError:
            proc.kill()
            counts = [received(n) for n in nsqds]
            raise AssertionError(f"messages on each nsqd: {counts}; kubeload said:\n{proc.communicate()[0]}") from None
        assert proc.poll() is None
        stop_file.touch()
        output, _ = proc.communicate(timeout=40)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, output
    result = _result(output)
    assert result["ok"] and result["lost"] == 0 and result["all_delivered"], output
    assert result["acknowledged"] > 200 and result["published"] == result["acknowledged"] + result["failed"]
    assert sorted((c["topic"], c["channel"]) for c in result["channels"]) == sorted(
        (t, c) for t in TOPICS for c in CHANNELS)
    for channel in result["channels"]:
        assert channel["delivered"] == channel["acknowledged"] + channel["failed_but_delivered"], output
    assert sum((n.topic("orders") or {})["message_count"] for n in nsqds) >= next(
        c["acknowledged"] for c in result["channels"] if c["topic"] == "orders")
    assert [p["name"] for p in result["phases"]] == ["load", "settle"]
    assert set(result["deliveries_by_node"]["load"]) == {n.tcp_address for n in nsqds}
    assert "OK: 0 acknowledged messages lost" in output


@pytest.mark.timeout(60)
def test_nothing_acknowledged_is_a_failure(servers: Servers) -> None:
    lookupd = servers.lookupd()
    unused = servers.nsqd(start=False)  # an address nothing listens on
    done = subprocess.run(_command(f"--lookupd-http-address={lookupd.http_address}",
                                   f"--nsqd-tcp-address={unused.tcp_address}", "--duration=1",
                                   "--settle-timeout=1"), capture_output=True, text=True, timeout=40)
    assert done.returncode == 1, done.stdout + done.stderr
    result = _result(done.stdout)
    assert result["acknowledged"] == 0 and not result["ok"]
    assert result["failed"] == result["published"] > 0


def test_it_needs_a_way_to_stop() -> None:
    done = subprocess.run(_command("--lookupd-http-address=127.0.0.1:1"), capture_output=True, text=True, timeout=30)
    assert done.returncode == 2
    assert "--stop-file or --duration" in done.stderr
