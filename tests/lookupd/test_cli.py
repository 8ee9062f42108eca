"""The nsqlookupd command: flags, config file, log lines, exit codes and signals."""
from __future__ import annotations

import json
import re
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from tests.lookupd.conftest import StartLookupd
from tests.lookupd.v1_peer import V1Peer, fake_nsqd
from tests.servers import BIN, HOST, Nsqlookupd


def run(*args: str, timeout: float = 20) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN / "nsqlookupd"), *args], capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


def test_version_prints_name_and_version() -> None:
    done = run("--version")
    assert done.returncode == 0
    assert re.fullmatch(r"nsqlookupd v1\.3\.0 \(nsq-operator v\S+, built w/python3\.\d+\.\d+\S*\)\n", done.stdout), done.stdout


def test_help_lists_nsqs_flags() -> None:
    done = run("-h")
    assert done.returncode == 0
    for flag in ("-tcp-address", "-http-address", "-broadcast-address", "-inactive-producer-timeout",
                 "-tombstone-lifetime", "-log-level", "-log-prefix"):
        assert flag in done.stderr
    assert '(default "0.0.0.0:4160")' in done.stderr and "(default 5m0s)" in done.stderr


@pytest.mark.parametrize("arg,flag", [
    ("--inactive-producer-timeout=5parsecs", "-inactive-producer-timeout"),
    ("--tombstone-lifetime=-1s", "-tombstone-lifetime"),
    ("--log-level=loud", "-log-level"),
    ("--tcp-address=no-port-here", "-tcp-address"),
    ("--http-address=127.0.0.1:99999", "-http-address"),
    ("--no-such-flag", "-no-such-flag"),
    ("--tcp-address", "-tcp-address"),
])
def test_a_bad_flag_exits_2_with_one_line_naming_it(arg: str, flag: str) -> None:
    done = run(arg)
    assert done.returncode == 2
    first_line = done.stderr.splitlines()[0]
    assert flag in first_line, done.stderr
    assert "Traceback" not in done.stderr


def test_listening_lines_carry_the_real_ports_in_nsqs_log_format(start_lookupd: StartLookupd) -> None:
    lookupd = start_lookupd()
    assert lookupd.tcp_port != 0 and lookupd.http_port != 0
    lines = lookupd.log().splitlines()
    stamp = r"\[nsqlookupd\] \d{4}/\d\d/\d\d \d\d:\d\d:\d\d\.\d{6}"
    assert any(re.fullmatch(rf"{stamp} INFO: TCP: listening on 127\.0\.0\.1:{lookupd.tcp_port}", x) for x in lines)
    assert any(re.fullmatch(rf"{stamp} INFO: HTTP: listening on 127\.0\.0\.1:{lookupd.http_port}", x) for x in lines)


def test_config_file_sits_between_defaults_and_flags(start_lookupd: StartLookupd, tmp_path: Path) -> None:
    config = tmp_path / "nsqlookupd.cfg"
    config.write_text('log_prefix = "[from-config] "\nlog_level = "debug"\n'
                      'broadcast_address = "config.example"\nunknown_key = 1\n')
    lookupd = start_lookupd(config=config, verbose=True)  # the helper's --broadcast-address wins
    with V1Peer.to(lookupd) as peer:
        assert json.loads(peer.identify(fake_nsqd(4150)))["broadcast_address"] == HOST
    lookupd.get("/ping")
    assert lookupd.stop() == 0
    log = lookupd.log()
    assert "[from-config] " in log and " DEBUG: " in log, log


def test_unreadable_config_file_exits_1(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("this is = = not toml")
    for path in (bad, tmp_path / "missing.toml"):
        done = run(f"--config={path}")
        assert done.returncode == 1
        assert str(path) in done.stderr and "Traceback" not in done.stderr


def test_an_address_in_use_exits_1(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind((HOST, 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = run(f"--tcp-address={HOST}:{port}", f"--http-address={HOST}:0")
    assert done.returncode == 1
    assert f"listen ({HOST}:{port}) failed" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_stops_it_promptly_with_exit_0_even_with_clients_connected(
        start_lookupd: StartLookupd, sig: int) -> None:
    lookupd: Nsqlookupd = start_lookupd()
    peer = V1Peer.to(lookupd)
    peer.identify(fake_nsqd(4150))
    http = socket.create_connection((HOST, lookupd.http_port))
    http.sendall(b"GET /ping HTTP/1.1\r\nHost: x\r\n\r\n")  # then stays open (keep-alive)
    http.recv(1024)
    try:
        started = time.monotonic()
        assert lookupd.stop(timeout=5, sig=sig) == 0
        assert time.monotonic() - started < 3
        assert peer.is_closed_by_server(timeout=1)
    finally:
        peer.close()
        http.close()


def test_log_format_json_writes_one_json_object_per_line(start_lookupd: StartLookupd) -> None:
    lookupd = start_lookupd(log_format="json")
    lookupd.stop()
    lines = [line for line in lookupd.log().splitlines() if line.startswith("{")]
    records = [json.loads(line) for line in lines]
    assert any("TCP: listening on" in r["msg"] for r in records), lines
    assert all(r["component"] == "nsqlookupd" and r["level"] for r in records)
