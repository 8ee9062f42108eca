"""The load generators of bench/ count what nsqd acknowledged: a figure is only as good as
its count. Each runs briefly against a real nsqd (no speed is asserted) and what it says it
published is checked against nsqd's own count."""
from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.conftest import Servers
from tests.servers import Nsqd, free_port, http, wait_for

BENCH = Path(__file__).resolve().parents[2] / "bench"


def _load(name: str) -> ModuleType:
    # from its file, not by putting bench/ on sys.path, where its scripts' names would
    # shadow modules of the same name for every later test of the session
    spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCH / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


loadgen = _load("loadgen")
fleet = _load("fleet")
cpu_limit = _load("cpu_limit")

@pytest.fixture(scope="module")
def cwriter(tmp_path_factory: pytest.TempPathFactory) -> str:
    if shutil.which("cc") is None and shutil.which("gcc") is None:
        pytest.skip("no C compiler")
    out = tmp_path_factory.mktemp("cwriter") / "cwriter"
    subprocess.run([shutil.which("cc") or "gcc", "-O2", "-Wall", "-Werror", "-pthread", "-o", str(out),
                    str(BENCH / "cwriter.c")], check=True)
    return str(out)


def _run(cwriter: str, server: Nsqd, *args: str) -> dict:
    done = subprocess.run([cwriter, server.host, str(server.tcp_port), "bench", "200", *args],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done
    return json.loads(done.stdout)


def _published(server: Nsqd) -> int:
    topic = server.topic("bench")
    return 0 if topic is None else topic["message_count"]


def test_cwriter_waiting_for_each_ok_counts_every_acknowledged_message(servers: Servers, cwriter: str) -> None:
    server = servers.nsqd()
    result = _run(cwriter, server, "1", "0.3", "2")
    assert not result["failed"] and result["messages"] > 0
    assert result["messages"] == result["round_trips"] == _published(server)
    mpub = _run(cwriter, server, "50", "0.3", "1")
    assert mpub["messages"] == 50 * mpub["round_trips"]
    assert _published(server) == result["messages"] + mpub["messages"]


def test_cwriter_at_a_fixed_rate_sends_on_schedule_and_matches_each_ok(servers: Servers, cwriter: str) -> None:
    server = servers.nsqd()
    result = _run(cwriter, server, "1", "0.5", "1", "2000")
    assert not result["failed"]
    # sent when due, not when the previous OK came: the count is the schedule's (0.5 s at 2000/s)
    assert result["messages"] == 1000 == _published(server)
    assert 0 < result["p50_us"] <= result["p99_us"] <= result["p999_us"] <= result["max_us"]


def test_cwriter_reports_a_refused_publish_as_a_failure(servers: Servers, cwriter: str) -> None:
    server = servers.nsqd(max_msg_size=100)  # every 200-byte body is refused: E_BAD_MESSAGE
    done = subprocess.run([cwriter, server.host, str(server.tcp_port), "bench", "200", "1", "0.3", "1", "1000"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and json.loads(done.stdout)["failed"] is True


def test_python_paced_publisher_counts_every_ok(servers: Servers) -> None:
    server = servers.nsqd()
    result = loadgen.pub_paced(server.tcp_address, "bench", 500, 5000.0)
    assert result["messages"] == len(result["latencies"]) == 500 == _published(server)
    assert all(latency > 0 for latency in result["latencies"])


def test_the_consumer_fleet_finishes_every_delivery_and_reads_the_servers_cpu_over_them(servers: Servers) -> None:
    server = servers.nsqd()
    assert server.proc is not None
    result = fleet.consumers(server.tcp_address, "fleet", ["a", "b"], 50, 2000, server_pid=server.proc.pid)
    assert result["deliveries"] == 4000
    channels = {c["channel_name"]: c for c in server.topic("fleet")["channels"]}
    assert {name: (c["message_count"], c["depth"], c["in_flight_count"]) for name, c in channels.items()} == \
        {"a": (2000, 0, 0), "b": (2000, 0, 0)}
    # 4000 deliveries and FINs cost the server some CPU (tens of ms: /proc counts in ticks
    # of 10), and no more than its threads can spend in the span
    assert 0 < result["server user s"] + result["server system s"] <= 2 * result["seconds"] + 0.05
    assert "server user s" not in fleet.consumers(server.tcp_address, "other", ["a"], 5, 10)


def test_the_null_server_answers_ok_to_each_publish(tmp_path: Path, cwriter: str) -> None:
    tcp, http_port = free_port("127.0.0.1"), free_port("127.0.0.1")
    proc = subprocess.Popen([sys.executable, str(BENCH / "null_nsqd.py"), f"--tcp-address=127.0.0.1:{tcp}",
                             f"--http-address=127.0.0.1:{http_port}", "--mem-queue-size=5"])
    try:
        wait_for(lambda: http("GET", f"http://127.0.0.1:{http_port}/ping", timeout=1)[0] == 200, 20)
        done = subprocess.run([cwriter, "127.0.0.1", str(tcp), "bench", "200", "1", "0.3", "1", "2000"],
                              capture_output=True, text=True, timeout=60)
        result = json.loads(done.stdout)
        assert done.returncode == 0 and result["messages"] == 600
    finally:
        proc.terminate()
        proc.wait(10)


def _can_limit_cpu() -> bool:
    try:
        cpu_limit.CpuLimit(0.5).close()
        return True
    except (OSError, RuntimeError):
        return False


@pytest.mark.skipif(not _can_limit_cpu(), reason="needs a writable cgroup cpu controller (root)")
def test_a_process_under_a_cpu_limit_gets_that_share_of_a_cpu_and_its_cgroup_goes_with_it() -> None:
    import time
    limit = cpu_limit.CpuLimit(0.2)
    # the child spins until it has used 0.2 s of CPU: alone on a CPU that takes 0.2 s, under
    # 20 ms per 100 ms period at least 0.9 s
    spin = "import time\nwhile time.process_time() < 0.2: pass"
    started = time.monotonic()
    done = subprocess.run(limit.argv([sys.executable, "-c", spin]), timeout=30)
    took = time.monotonic() - started
    assert done.returncode == 0
    assert took >= 0.7, f"0.2 s of CPU took {took:.2f} s: not held to a fifth of a CPU"
    assert limit.throttled_seconds() > 0
    limit.close()
    assert not limit.path.exists()
