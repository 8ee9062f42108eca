"""The ``nsqd`` command: NSQ's flag names and defaults, Go's flag syntax, ``--config``
TOML, one-line errors naming the flag, ``--version``, the listening lines with the real
port when port 0 was asked for, and a prompt, clean stop on SIGTERM and SIGINT."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest

from nsqd import cli
from nsqd.options import NsqdOptions
from tests.broker.wire import WireConn
from tests.servers import BIN, http, request, wait_for

NSQD = str(BIN / "nsqd")

# nsqd v1.3.0's flags (`nsqd -h`); deprecated ones are accepted but not listed here
NSQ_FLAGS = [
    "auth-http-address", "auth-http-request-method", "broadcast-address", "broadcast-http-port",
    "broadcast-tcp-port", "data-path", "deflate", "e2e-processing-latency-percentile",
    "e2e-processing-latency-window-time", "http-address", "http-client-connect-timeout",
    "http-client-request-timeout", "https-address", "log-level", "log-prefix", "lookupd-tcp-address",
    "max-body-size", "max-bytes-per-file", "max-channel-consumers", "max-deflate-level",
    "max-heartbeat-interval", "max-msg-size", "max-msg-timeout", "max-output-buffer-size",
    "max-output-buffer-timeout", "max-rdy-count", "max-req-timeout", "mem-queue-size",
    "min-output-buffer-timeout", "msg-timeout", "node-id", "output-buffer-timeout",
    "queue-scan-selection-count", "queue-scan-worker-pool-max", "snappy", "statsd-address",
    "statsd-exclude-ephemeral", "statsd-interval", "statsd-mem-stats", "statsd-prefix",
    "statsd-udp-packet-size", "sync-every", "sync-timeout", "tcp-address", "tls-cert",
    "tls-client-auth-policy", "tls-key", "tls-min-version", "tls-required", "tls-root-ca-file",
    "topology-region", "topology-zone",
]

# nsqd v1.3.0's defaults, by config-file name (durations in seconds)
NSQ_DEFAULTS = {
    "tcp_address": "0.0.0.0:4150", "http_address": "0.0.0.0:4151", "https_address": "0.0.0.0:4152",
    "log_level": "info", "log_prefix": "[nsqd] ", "mem_queue_size": 10000,
    "max_bytes_per_file": 104857600, "sync_every": 2500, "sync_timeout": 2.0,
    "queue_scan_selection_count": 20, "queue_scan_worker_pool_max": 4,
    "msg_timeout": 60.0, "max_msg_timeout": 900.0, "max_msg_size": 1048576,
    "max_body_size": 5242880, "max_req_timeout": 3600.0, "max_heartbeat_interval": 60.0,
    "max_rdy_count": 2500, "max_output_buffer_size": 65536, "max_output_buffer_timeout": 30.0,
    "min_output_buffer_timeout": 0.025, "output_buffer_timeout": 0.25, "max_channel_consumers": 0,
    "statsd_prefix": "nsq.%s", "statsd_interval": 60.0, "statsd_mem_stats": True,
    "statsd_udp_packet_size": 508, "e2e_processing_latency_window_time": 600.0,
    "e2e_processing_latency_percentiles": [], "deflate": True, "max_deflate_level": 6,
    "snappy": True, "http_client_connect_timeout": 2.0, "http_client_request_timeout": 5.0,
    "nsqlookupd_tcp_addresses": [], "auth_http_addresses": [], "broadcast_tcp_port": 0,
    "broadcast_http_port": 0, "tls_cert": "", "tls_key": "", "tls_root_ca_file": "",
    "tls_client_auth_policy": "", "statsd_address": "", "data_path": "",
}


def run(*args: str, timeout: float = 20) -> subprocess.CompletedProcess[str]:
    return subprocess.run([NSQD, *args], capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


@dataclass
class Running:
    proc: subprocess.Popen[bytes]
    log_path: Path
    tcp: str
    http_port: int

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def config(self, opt: str) -> object:
        answer = request("GET", f"http://127.0.0.1:{self.http_port}/config/{opt}")
        assert answer.status == 200, (opt, answer.status, answer.body)
        return answer.value()

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 10) -> tuple[int, float]:
        started = time.monotonic()
        os.killpg(self.proc.pid, sig)
        code = self.proc.wait(timeout)
        return code, time.monotonic() - started


@pytest.fixture
def start(tmp_path: Path) -> Iterator:
    """``start(*flags)``: nsqd on 127.0.0.1 port 0 (TCP and HTTP); the ports come from its log."""
    started: list[subprocess.Popen[bytes]] = []

    def launch(*flags: str) -> Running:
        log_path = tmp_path / f"nsqd-{len(started)}.log"
        argv = [NSQD, "--tcp-address=127.0.0.1:0", "--http-address=127.0.0.1:0",
                "--broadcast-address=127.0.0.1", f"--data-path={tmp_path / f'data{len(started)}'}", *flags]
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    cwd=tmp_path, start_new_session=True)
        started.append(proc)

        def listening() -> tuple[str, str] | None:
            if proc.poll() is not None:
                raise RuntimeError(f"nsqd exited with {proc.returncode}:\n{log_path.read_text()}")
            text = log_path.read_text(errors="replace")
            tcp = re.search(r"TCP: listening on (\S+)", text)
            web = re.search(r"HTTP: listening on (\S+)", text)
            return (tcp.group(1), web.group(1)) if tcp and web else None

        tcp, web = wait_for(listening, 20, message="nsqd logs both listening lines")
        running = Running(proc, log_path, tcp, int(web.rsplit(":", 1)[1]))
        wait_for(lambda: http("GET", f"http://127.0.0.1:{running.http_port}/ping", timeout=1)[0] == 200)
        return running

    yield launch
    for proc in started:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


# -- without a server --------------------------------------------------------------------
# The command line is read before anything starts, so its errors and -h are checked in
# process; one real process proves that main's status becomes the exit status.
def test_version_exits_0_from_a_real_process() -> None:
    result = run("-version")
    assert result.returncode == 0
    assert re.fullmatch(r"nsqd v1\.3\.0 \(.+\)\n", result.stdout), result.stdout


def test_an_unknown_flag_exits_2_from_a_real_process() -> None:
    result = run("--no-such-flag")
    assert result.returncode == 2
    assert result.stdout == "" and result.stderr.strip().splitlines() == [
        "nsqd: flag provided but not defined: -no-such-flag"]


def test_version_in_either_spelling(capsys: pytest.CaptureFixture[str]) -> None:
    for flag in ("--version", "-version"):
        assert cli.main([flag]) == 0
        assert re.fullmatch(r"nsqd v1\.3\.0 \(.+\)\n", capsys.readouterr().out)


def test_help_lists_every_nsq_flag(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["-h"]) == 0
    printed = capsys.readouterr()
    listed = set(re.findall(r"^  -([a-z0-9-]+)", printed.out + printed.err, re.M))
    assert set(NSQ_FLAGS) <= listed, sorted(set(NSQ_FLAGS) - listed)
    assert "(default 10000)" in printed.err + printed.out


def test_model_defaults_are_nsqs() -> None:
    options = NsqdOptions()
    assert {k: getattr(options, k) for k in NSQ_DEFAULTS} == NSQ_DEFAULTS
    assert 0 <= options.node_id < 1024


def _one_error_line(capsys: pytest.CaptureFixture[str]) -> str:
    printed = capsys.readouterr()
    lines = (printed.out + printed.err).strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0]


@pytest.mark.parametrize("args,named", [
    (["--mem-queue-size=abc"], "mem-queue-size"),
    (["-msg-timeout", "5parsecs"], "msg-timeout"),
    (["--max-deflate-level=12"], "max-deflate-level"),
    (["--deflate=maybe"], "deflate"),
    (["--log-level=loud"], "log-level"),
    (["--no-such-flag"], "no-such-flag"),
    (["--mem-queue-size"], "mem-queue-size"),
    (["--tls-required=sometimes"], "tls-required"),
    (["--queue-scan-worker-pool-max=0"], "queue-scan-worker-pool-max"),
    (["--busy-poll-window=20ms"], "busy-poll-window"),
    (["--busy-poll-window=-1us"], "busy-poll-window"),
])
def test_bad_flags_exit_non_zero_with_one_line_naming_the_flag(args: list[str], named: str,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(args) != 0
    line = _one_error_line(capsys)
    assert f"-{named}" in line, line


def test_bad_config_file_values_exit_non_zero_naming_the_option(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "nsqd.toml"
    config.write_text('mem_queue_size = "lots"\n')
    assert cli.main([f"--config={config}"]) != 0
    line = _one_error_line(capsys)
    assert "mem-queue-size" in line or "mem_queue_size" in line

    assert cli.main([f"--config={tmp_path / 'missing.toml'}"]) != 0
    assert "missing.toml" in _one_error_line(capsys)

    config.write_text("this is = not [toml\n")
    assert cli.main(["-config", str(config)]) != 0
    assert str(config) in _one_error_line(capsys)


@pytest.mark.parametrize("args,named", [
    (["--tcp-address=garbage"], "tcp-address"),
    (["--tcp-address=127.0.0.1:port"], "tcp-address"),
    (["--http-address=127.0.0.1:65536"], "http-address"),
    (["--https-address=::1:4152"], "https-address"),            # IPv6 hosts go in brackets
    (["--https-address=[::1:4152"], "https-address"),
    (["--statsd-address=statsd"], "statsd-address"),
    (["--lookupd-tcp-address=127.0.0.1:4160", "--lookupd-tcp-address=lookupd"], "lookupd-tcp-address"),
    (["--lookupd-tcp-address=127.0.0.1:0"], "lookupd-tcp-address"),
    (["--broadcast-address="], "broadcast-address"),
    (["--broadcast-address=127.0.0.1:4150"], "broadcast-address"),  # a host: the ports are flags of their own
])
def test_bad_addresses_are_refused_naming_the_flag(args: list[str], named: str,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    # load_options, not main: with a bad address taken, main would start a server
    assert cli.load_options(args) == 2
    line = _one_error_line(capsys)
    assert line.startswith("nsqd: ") and f"-{named}" in line, line


def test_a_bad_address_in_the_config_file_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "nsqd.toml"
    config.write_text('http_address = "localhost"\n')
    assert cli.load_options([f"--config={config}"]) == 2
    assert "-http-address" in _one_error_line(capsys)


def test_addresses_in_every_form_go_accepts() -> None:
    options = cli.load_options([
        "--tcp-address=[::1]:0", "--http-address=:4151", "--https-address=localhost:65535",
        "--broadcast-address=::1", "--statsd-address=statsd.monitoring:8125",
        "--lookupd-tcp-address=lookupd-0.lookupd.nsq.svc:4160", "--lookupd-tcp-address=[fe80::1]:4160"])
    assert isinstance(options, NsqdOptions)
    assert (options.tcp_address, options.http_address, options.https_address) == (
        "[::1]:0", ":4151", "localhost:65535")
    assert options.nsqlookupd_tcp_addresses == ["lookupd-0.lookupd.nsq.svc:4160", "[fe80::1]:4160"]
    assert options.statsd_address == "statsd.monitoring:8125" and options.broadcast_address == "::1"
    assert isinstance(cli.load_options(["--statsd-address="]), NsqdOptions)  # empty: no statsd


def test_a_port_out_of_range_exits_2_from_a_real_process() -> None:
    result = run("--tcp-address=127.0.0.1:70000")
    assert result.returncode == 2, result
    assert result.stdout == "" and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "-tcp-address" in result.stderr and "70000" in result.stderr


# -- with a server -----------------------------------------------------------------------
def test_go_flag_syntax_config_file_and_port_zero(start, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Defaults, then the config file, then the flags; Go's flag syntax; the real ports
    logged for port 0; a clean exit on SIGINT (the busy stop below uses SIGTERM)."""
    config = tmp_path / "nsqd.toml"
    config.write_text(
        "max_body_size = 123456\n"
        "max_rdy_count = 7\n"
        'msg_timeout = "45s"\n'
        "max_req_timeout = 120000\n"          # a bare integer is milliseconds
        'nsqlookupd_tcp_addresses = ["127.0.0.1:3"]\n'
        'log_level = "warn"\n'
        "no_such_option = 1\n"                # unknown keys do not stop nsqd
    )
    nsqd = start(
        f"--config={config}", "--log-level=info",
        "-mem-queue-size", "77",                                # single dash, separate value
        "--max-rdy-count=9", "--max-rdy-count", "10",           # the last one wins, over the file
        "--lookupd-tcp-address=127.0.0.1:1", "-lookupd-tcp-address", "127.0.0.1:2",  # accumulates
        "--snappy=false", "-deflate=f",                         # Go's boolean spellings
        "--statsd-mem-stats=false", "--statsd-mem-stats",       # a bare boolean is true
        "--verbose",                                            # deprecated, accepted
        "--max-msg-timeout=1m30s", "--max-heartbeat-interval", "1.5m",
        "--e2e-processing-latency-percentile=1.0,0.99", "--e2e-processing-latency-percentile=0.5",
    )
    host, port = nsqd.tcp.rsplit(":", 1)
    assert host == "127.0.0.1" and int(port) > 0
    status, body = http("GET", f"http://127.0.0.1:{nsqd.http_port}/info")
    assert status == 200 and json.loads(body)["tcp_port"] == int(port)
    # from the file, over the defaults
    assert nsqd.config("max_body_size") == 123456
    assert nsqd.config("msg_timeout") == 45 * 10**9
    assert nsqd.config("max_req_timeout") == 120 * 10**9
    assert nsqd.config("max_msg_size") == 1048576        # untouched default
    # from the flags, over the file
    assert nsqd.config("max_rdy_count") == 10
    assert nsqd.config("nsqlookupd_tcp_addresses") == ["127.0.0.1:1", "127.0.0.1:2"]
    assert nsqd.config("log_level") == 2  # Go's number for info
    # Go's syntax
    assert nsqd.config("mem_queue_size") == 77
    assert nsqd.config("snappy") is False and nsqd.config("deflate") is False
    assert nsqd.config("statsd_mem_stats") is True
    assert nsqd.config("max_msg_timeout") == 90 * 10**9
    assert nsqd.config("max_heartbeat_interval") == 90 * 10**9
    assert sorted(nsqd.config("e2e_processing_latency_percentiles")) == [0.5, 0.99, 1.0]  # type: ignore[arg-type]
    code, took = nsqd.stop(signal.SIGINT)
    assert code == 0 and took < 5, (code, took)


def test_sigterm_stops_a_busy_nsqd_cleanly(start) -> None:  # type: ignore[no-untyped-def]
    """Messages on disk, in memory and in flight, a consumer connected (the idle stops
    above use SIGTERM and SIGINT)."""
    nsqd = start("--mem-queue-size=10")
    conn = WireConn(nsqd.tcp)
    try:
        conn.mpub("busy", [b"m%d" % i for i in range(200)])
        conn.expect_ok()
        conn.sub("busy", "ch")
        conn.expect_ok()
        conn.rdy(5)
        conn.read_messages(5)
        code, took = nsqd.stop(signal.SIGTERM)
        assert code == 0 and took < 5, (code, took)
        assert conn.closed_within(2)
    finally:
        conn.close()
    assert "Traceback" not in nsqd.log()

