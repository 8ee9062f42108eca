"""nsq_tail, nsq_stat and to_nsq run as real processes against real nsqd/nsqlookupd: what
they print, what they publish, what nsqd sees of their connections, and their exit
statuses. The pure parts (record splitting, the stats table, passthrough options, rate
pacing) and the command-line errors are checked in process, where they are fast.
"""
from __future__ import annotations

import asyncio
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from nsq_client import Config
from nsq_client.tools import stat as nsq_stat
from nsq_client.tools import tail as nsq_tail
from nsq_client.tools import to_nsq
from nsq_client.tools.config_options import build_config, parse_config_options
from nsq_client.tools.delimited_input import DelimitedRecords
from nsq_client.tools.stat_table import ChannelTotals, channel_totals, header_lines, row
from nsq_client.tools.to_nsq import Pacer
from nsq_protocol.flags import FlagError
from tests.broker.wire import WireConn
from tests.client.conftest import nsqd_starter
from tests.conftest import Servers
from tests.servers import Nsqd, Nsqlookupd, free_port, wait_for

TOOL_TIMEOUT = 30.0
TAIL_CHANNEL = re.compile(r"tail\d{6}#ephemeral")
# nsq_stat's two header lines, byte for byte as NSQ's nsq_stat prints them
STAT_HEADER = [
    "------rate------+----------------depth----------------+--------------metadata---------------",
    "ingress  egress |   total     mem    disk inflt   def |     req     t-o         msgs clients",
]


# -- running the tools ------------------------------------------------------------------------
def command(tool: str, *args: str) -> list[str]:
    return [sys.executable, "-m", f"nsq_client.tools.{tool}", *args]


def run_tool(tool: str, *args: str, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(command(tool, *args), input=stdin, capture_output=True, timeout=TOOL_TIMEOUT)


class Running:
    """A tool process whose output goes to files (no pipe can fill up and stall it)."""

    def __init__(self, tool: str, args: tuple[str, ...], workdir: Path) -> None:
        self.out_path = workdir / f"{tool}.out"
        self.err_path = workdir / f"{tool}.err"
        with open(self.out_path, "wb") as out, open(self.err_path, "wb") as err:
            self.proc = subprocess.Popen(command(tool, *args), stdin=subprocess.DEVNULL, stdout=out, stderr=err)

    def wait(self, timeout: float = TOOL_TIMEOUT) -> int:
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"{self.proc.args} still running after {timeout}s; "
                                 f"stdout: {self.stdout!r}; stderr: {self.stderr}") from None

    @property
    def stdout(self) -> bytes:
        return self.out_path.read_bytes()

    @property
    def stderr(self) -> str:
        return self.err_path.read_text(errors="replace")


@pytest.fixture
def start_tool(tmp_path: Path) -> Iterator[Callable[..., Running]]:
    """``start_tool("tail", *args)``; any still running at teardown is killed."""
    started: list[Running] = []

    def start(tool: str, *args: str) -> Running:
        workdir = tmp_path / f"{tool}{len(started)}"
        workdir.mkdir()
        running = Running(tool, args, workdir)
        started.append(running)
        return running

    yield start
    for running in started:
        if running.proc.poll() is None:
            running.proc.kill()
            running.proc.wait(10)


# -- what nsqd sees ----------------------------------------------------------------------------
def channels(nsqd: Nsqd, topic: str) -> list[dict[str, Any]]:
    found = nsqd.topic(topic)
    return found["channels"] if found else []


def tail_client(nsqd: Nsqd, topic: str, channel: re.Pattern[str] | str = TAIL_CHANNEL) -> dict[str, Any] | None:
    """The one client of the tail's channel, once it is subscribed and has sent RDY."""
    for c in channels(nsqd, topic):
        name_matches = channel.fullmatch(c["channel_name"]) if isinstance(channel, re.Pattern) else c["channel_name"] == channel
        if name_matches and len(c["clients"]) == 1 and c["clients"][0]["ready_count"] > 0:
            return c["clients"][0]
    return None


def create_channel(nsqd: Nsqd, topic: str, channel: str) -> None:
    assert nsqd.post(f"/topic/create?topic={topic}").status == 200
    assert nsqd.post(f"/channel/create?topic={topic}&channel={channel}").status == 200


def message_count(nsqd: Nsqd, topic: str) -> int:
    found = nsqd.topic(topic)
    return found["message_count"] if found else 0


def stat_rows(output: bytes) -> list[list[int]]:
    """nsq_stat's data rows as numbers (the header lines left out)."""
    rows = []
    for line in output.decode().splitlines():
        if line in STAT_HEADER:
            continue
        rows.append([int(v) for v in line.replace("|", " ").split()])
    return rows


# -- to_nsq -> nsq_tail ---------------------------------------------------------------------------
def test_to_nsq_lines_come_out_of_nsq_tail_in_order(shared_nsqd: Nsqd, topic: str,
                                                    start_tool: Callable[..., Running]) -> None:
    tail = start_tool("tail", f"--topic={topic}", f"--nsqd-tcp-address={shared_nsqd.tcp_address}", "--n=4",
                      "--consumer-opt=client_id,tailer", "--consumer-opt=deflate")
    client = wait_for(lambda: tail_client(shared_nsqd, topic), message="nsq_tail subscribed")
    # --n below --max-in-flight lowers RDY to n; both forms of --consumer-opt reached IDENTIFY
    assert client["ready_count"] == 4
    assert client["client_id"] == "tailer" and client["deflate"] is True
    assert client["user_agent"].startswith("nsq_tail/")

    published = run_tool("to_nsq", f"--topic={topic}", f"--nsqd-tcp-address={shared_nsqd.tcp_address}",
                         stdin=b"one\ntwo\n\nthree\nfour")
    assert published.returncode == 0, published.stderr

    assert tail.wait() == 0, tail.stderr
    assert tail.stdout == b"one\ntwo\nthree\nfour\n"
    # it closed its connection on the way out, and nsqd dropped the ephemeral channel
    wait_for(lambda: not channels(shared_nsqd, topic), message="the tail's ephemeral channel is gone")


def test_nsq_tail_stops_gracefully_on_sigterm(shared_nsqd: Nsqd, topic: str,
                                              start_tool: Callable[..., Running]) -> None:
    tail = start_tool("tail", f"--topic={topic}", "--channel=watch", "--max-in-flight=7",
                      f"--nsqd-tcp-address={shared_nsqd.tcp_address}")
    assert wait_for(lambda: tail_client(shared_nsqd, topic, "watch"))["ready_count"] == 7
    tail.proc.send_signal(signal.SIGTERM)
    assert tail.wait() == 0, tail.stderr
    assert tail.stdout == b""
    # the named channel stays, without the tail's connection
    wait_for(lambda: [c["clients"] for c in channels(shared_nsqd, topic)] == [[]], message="tail disconnected")


@dataclass
class Cluster:
    lookupd: Nsqlookupd
    on_disk: Nsqd  # mem_queue_size=0: every message it holds is on disk
    in_memory: Nsqd


@pytest.fixture(scope="module")
def cluster(module_flavour: str, module_servers: Servers) -> Cluster:
    """A lookupd and two nsqds registered with it, shared by a module's tests (each uses
    topics of its own)."""
    lookupd = module_servers.lookupd()
    start = nsqd_starter(module_servers, module_flavour)
    return Cluster(lookupd, on_disk=start(lookupd_tcp_address=lookupd.tcp_address, mem_queue_size=0),
                   in_memory=start(lookupd_tcp_address=lookupd.tcp_address))


def test_tools_over_a_cluster_through_lookupd(cluster: Cluster, start_tool: Callable[..., Running]) -> None:
    lookupd, first, second = cluster.lookupd, cluster.on_disk, cluster.in_memory
    both = (f"--nsqd-tcp-address={first.tcp_address}", f"--nsqd-tcp-address={second.tcp_address}")

    # several nsqds: the failover pool spreads the records over them
    records = [f"r{i}" for i in range(10)]
    spread = run_tool("to_nsq", "--topic=events", *both, "--delimiter=,", "--rate=200",
                      stdin=",".join(records).encode() + b",")
    assert spread.returncode == 0, spread.stderr
    assert message_count(first, "events") > 0 and message_count(second, "events") > 0
    assert message_count(first, "events") + message_count(second, "events") == 10
    alone = run_tool("to_nsq", "--topic=audit", f"--nsqd-tcp-address={second.tcp_address}", stdin=b"a1\na2\n")
    assert alone.returncode == 0, alone.stderr

    wait_for(lambda: lookupd.producer_tcp_ports("events") == {first.tcp_port, second.tcp_port}
             and lookupd.producer_tcp_ports("audit") == {second.tcp_port}, message="lookupd knows both topics")
    # a named channel: an ephemeral one drops what does not fit in memory, all of it on_disk's
    tail = start_tool("tail", "--topic=events", "--topic=audit", "--channel=printer", "--print-topic", "--n=12",
                      f"--lookupd-http-address={lookupd.http_address}")
    assert tail.wait() == 0, tail.stderr
    printed = tail.stdout.decode().splitlines()
    assert sorted(printed) == sorted([f"events | {r}" for r in records] + ["audit | a1", "audit | a2"])
    assert [line for line in printed if line.startswith("audit")] == ["audit | a1", "audit | a2"]


# -- nsq_stat ------------------------------------------------------------------------------------
def test_nsq_stat_prints_a_channels_numbers(shared_nsqd: Nsqd, topic: str) -> None:
    create_channel(shared_nsqd, topic, "work")
    consumer = WireConn(shared_nsqd.tcp_address)
    try:
        consumer.mpub(topic, [f"m{i}".encode() for i in range(10)])
        consumer.expect_ok()
        for i in range(2):
            consumer.dpub(topic, 60_000, f"later{i}".encode())
            consumer.expect_ok()
        consumer.sub(topic, "work")
        consumer.expect_ok()
        consumer.rdy(3)
        held = consumer.read_messages(3)
        consumer.req(held[0].id, 60_000)  # deferred again; nsqd sends a fourth in its place
        consumer.read_messages(1)
        wait_for(lambda: shared_nsqd.channel(topic, "work")["requeue_count"] == 1)

        result = run_tool("stat", f"--topic={topic}", "--channel=work", "--interval=50ms", "--count=2",
                          f"--nsqd-http-address={shared_nsqd.http_address}")
    finally:
        consumer.close()
    assert result.returncode == 0, result.stderr
    lines = result.stdout.decode().splitlines()
    assert lines[:2] == STAT_HEADER and len(lines) == 4
    # nothing moved between polls: no rates; 10 + 2 deferred received, 4 delivered of which
    # 1 deferred by REQ, 3 in flight, 6 waiting in memory, one client
    quiet = [0, 0, 6, 6, 0, 3, 3, 1, 0, 12, 1]
    assert stat_rows(result.stdout) == [quiet, quiet]


def test_nsq_stat_sums_a_cluster_from_lookupd_or_nsqd_addresses(cluster: Cluster,
                                                                start_tool: Callable[..., Running]) -> None:
    lookupd, on_disk, in_memory = cluster.lookupd, cluster.on_disk, cluster.in_memory
    for nsqd, count in ((on_disk, 4), (in_memory, 6)):
        create_channel(nsqd, "orders", "billing")
        assert nsqd.post("/mpub?topic=orders", b"\n".join(b"o%d" % i for i in range(count))).status == 200
    wait_for(lambda: lookupd.producer_tcp_ports("orders") == {on_disk.tcp_port, in_memory.tcp_port})

    expected = [0, 0, 10, 6, 4, 0, 0, 0, 0, 10, 0]
    through_lookupd = start_tool("stat", "--topic=orders", "--channel=billing", "--interval=50ms", "--count=1",
                                 f"--lookupd-http-address={lookupd.http_address}")
    listed = run_tool("stat", "--topic=orders", "--channel=billing", "--interval=50ms", "--count=1",
                      f"--nsqd-http-address={on_disk.http_address}", f"--nsqd-http-address={in_memory.http_address}")
    assert through_lookupd.wait() == 0, through_lookupd.stderr
    assert listed.returncode == 0, listed.stderr
    assert stat_rows(through_lookupd.stdout) == [expected]
    assert stat_rows(listed.stdout) == [expected]

    missing = run_tool("stat", "--topic=orders", "--channel=nobody", f"--lookupd-http-address={lookupd.http_address}")
    assert missing.returncode == 1
    assert b"failed to find channel(nobody) in stats metadata for topic(orders)" in missing.stderr


def test_nsq_stat_status_every_is_the_deprecated_interval(shared_nsqd: Nsqd, topic: str) -> None:
    """NSQ's --status-every is a duration that replaces --interval: with an hour-long
    --interval the run only ends in time if the 50ms --status-every is the interval."""
    create_channel(shared_nsqd, topic, "work")
    result = run_tool("stat", f"--topic={topic}", "--channel=work", "--interval=1h", "--status-every=50ms",
                      "--count=2", f"--nsqd-http-address={shared_nsqd.http_address}")
    assert result.returncode == 0, result.stderr
    assert b"--status-every is deprecated, use --interval" in result.stderr
    assert stat_rows(result.stdout) == [[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]] * 2


def test_nsq_stat_repeats_the_header_every_25_polls(shared_nsqd: Nsqd, topic: str) -> None:
    create_channel(shared_nsqd, topic, "work")
    result = run_tool("stat", f"--topic={topic}", "--channel=work", "--interval=10ms", "--count=26",
                      f"--nsqd-http-address={shared_nsqd.http_address}")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.decode().splitlines()
    # poll 0: header only (the baseline); polls 1-24: a row each; poll 25: header and row; poll 26: row
    headers = [i for i, line in enumerate(lines) if line in STAT_HEADER]
    assert headers == [0, 1, 26, 27] and len(lines) == 30


class SilentHttpServer:
    """Takes connections on 127.0.0.1 and reads requests without ever answering; notes when
    the first request arrived and when its client hung up."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.address = "127.0.0.1:%d" % self.listener.getsockname()[1]
        self.request_at: float | None = None
        self.hung_up_at: float | None = None
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        self.listener.settimeout(TOOL_TIMEOUT)
        try:
            conn, _ = self.listener.accept()
        except OSError:
            return
        with conn:
            conn.settimeout(TOOL_TIMEOUT)
            try:
                while chunk := conn.recv(4096):
                    if self.request_at is None:
                        self.request_at = time.monotonic()
                self.hung_up_at = time.monotonic()
            except OSError:
                pass

    def close(self) -> None:
        self.listener.close()
        self._thread.join(TOOL_TIMEOUT)


def test_nsq_stat_gives_up_on_a_silent_nsqd_after_the_request_timeout() -> None:
    silent = SilentHttpServer()
    try:
        result = run_tool("stat", "--topic=t", "--channel=c", "--http-client-request-timeout=300ms",
                          f"--nsqd-http-address={silent.address}")
        wait_for(lambda: silent.hung_up_at is not None, 10, message="nsq_stat hung up")
    finally:
        silent.close()
    assert result.returncode == 1
    assert b"no nsqd answered" in result.stderr
    assert silent.request_at is not None and silent.hung_up_at is not None
    # far sooner than the 5s default: the flag set the limit
    assert silent.hung_up_at - silent.request_at < 3.0


def test_nsq_stat_gives_up_on_an_unreachable_nsqd_after_the_connect_timeout() -> None:
    """A listener whose accept queue is full drops new SYNs, so a connect to it hangs:
    only the 300ms connect timeout, not the minute-long request timeout, ends the run
    within the tool's time limit."""
    full = socket.create_server(("127.0.0.1", 0), backlog=0)
    queued: list[socket.socket] = []
    try:
        while True:  # fill the accept queue until a connect no longer completes
            probe = socket.socket()
            queued.append(probe)
            probe.settimeout(0.5)
            try:
                probe.connect(full.getsockname())
            except TimeoutError:
                break
            assert len(queued) < 10, "the accept queue never filled"
        result = run_tool("stat", "--topic=t", "--channel=c", "--http-client-connect-timeout=300ms",
                          "--http-client-request-timeout=60s",
                          "--nsqd-http-address=127.0.0.1:%d" % full.getsockname()[1])
    finally:
        for probe in queued:
            probe.close()
        full.close()
    assert result.returncode == 1
    assert b"no nsqd answered" in result.stderr


# -- to_nsq's failures -----------------------------------------------------------------------
def test_to_nsq_exits_1_when_a_publish_fails(start_nsqd: Callable[..., Nsqd], topic: str) -> None:
    nsqd = start_nsqd(max_msg_size=16)
    result = run_tool("to_nsq", f"--topic={topic}", f"--nsqd-tcp-address={nsqd.tcp_address}",
                      stdin=b"short\n" + b"x" * 100 + b"\nnever\n")
    assert result.returncode == 1
    assert b"E_BAD_MESSAGE" in result.stderr
    assert message_count(nsqd, topic) == 1

    unreachable = run_tool("to_nsq", f"--topic={topic}", f"--nsqd-tcp-address=127.0.0.1:{free_port()}",
                           stdin=b"lost\n")
    assert unreachable.returncode == 1
    assert b"refused" in unreachable.stderr.lower()


def test_to_nsq_fails_over_to_the_nsqd_that_is_up(shared_nsqd: Nsqd, topic: str) -> None:
    down = f"127.0.0.1:{free_port()}"
    result = run_tool("to_nsq", f"--topic={topic}", f"--nsqd-tcp-address={down}",
                      f"--nsqd-tcp-address={shared_nsqd.tcp_address}", stdin=b"a\nb\nc\nd\ne\n")
    assert result.returncode == 0, result.stderr
    assert message_count(shared_nsqd, topic) == 5


def test_to_nsq_stops_reading_on_sigterm_and_exits_0(shared_nsqd: Nsqd, topic: str) -> None:
    proc = subprocess.Popen(command("to_nsq", f"--topic={topic}", f"--nsqd-tcp-address={shared_nsqd.tcp_address}"),
                            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        assert proc.stdin is not None
        proc.stdin.write(b"first\nsecond\n")
        proc.stdin.flush()
        wait_for(lambda: message_count(shared_nsqd, topic) == 2, message="both lines published")
        proc.send_signal(signal.SIGTERM)  # stdin stays open: it is waiting for more
        assert proc.wait(TOOL_TIMEOUT) == 0
    finally:
        for pipe in (proc.stdin, proc.stderr):
            if pipe is not None:
                pipe.close()
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


# -- command lines ---------------------------------------------------------------------------------
TAIL_TARGET = ("--topic=t", "--nsqd-tcp-address=127.0.0.1:4150")
STAT_TARGET = ("--topic=t", "--channel=c", "--nsqd-http-address=127.0.0.1:4151")
TO_NSQ_TARGET = ("--topic=t", "--nsqd-tcp-address=127.0.0.1:4150")

BAD_COMMAND_LINES = [
    (nsq_tail, (*TAIL_TARGET, "--follow"), "flag provided but not defined: -follow"),
    (nsq_tail, (*TAIL_TARGET, "--n=many"), "-n"),
    (nsq_tail, (*TAIL_TARGET, "--max-in-flight=-1"), "-max-in-flight"),
    (nsq_tail, (*TAIL_TARGET, "--consumer-opt=no_such_option=1"), "-consumer-opt: unknown option 'no_such_option'"),
    (nsq_tail, (*TAIL_TARGET, "--consumer-opt=max_attempts=-1"), "-consumer-opt: max_attempts must be within"),
    (nsq_tail, (*TAIL_TARGET, "--consumer-opt=heartbeat_interval,5"), "-consumer-opt"),
    (nsq_tail, ("--topic=no spaces", "--nsqd-tcp-address=a:1"), "-topic"),
    (nsq_tail, ("--nsqd-tcp-address=a:1",), "--topic is required"),
    (nsq_tail, ("--topic=t",), "--nsqd-tcp-address or --lookupd-http-address required"),
    (nsq_tail, (*TAIL_TARGET, "--lookupd-http-address=a:1"), "not both"),
    (nsq_tail, (*TAIL_TARGET, "--config=tail.toml"), "-config"),
    (nsq_stat, (*STAT_TARGET, "--interval=soon"), "-interval"),
    (nsq_stat, (*STAT_TARGET, "--interval=0s"), "-interval"),
    (nsq_stat, (*STAT_TARGET, "--count=0"), "-count"),
    (nsq_stat, (*STAT_TARGET, "--status-every=0"), "-status-every"),
    (nsq_stat, (*STAT_TARGET, "--status-every=25"), "-status-every"),  # a duration now, as in NSQ
    (nsq_stat, (*STAT_TARGET, "--http-client-request-timeout=0s"), "-http-client-request-timeout"),
    (nsq_stat, (*STAT_TARGET, "--http-client-connect-timeout=soon"), "-http-client-connect-timeout"),
    (nsq_stat, ("--topic=t", "--nsqd-http-address=a:1"), "--topic and --channel are required"),
    (nsq_stat, ("--topic=t", "--channel=c"), "--nsqd-http-address or --lookupd-http-address required"),
    (to_nsq, (*TO_NSQ_TARGET, "--delimiter=ab"), "-delimiter"),
    (to_nsq, (*TO_NSQ_TARGET, "--rate=-5"), "-rate"),
    (to_nsq, (*TO_NSQ_TARGET, "--producer-opt=deflate", "--producer-opt=snappy"), "-producer-opt"),
    (to_nsq, ("--topic=t",), "--nsqd-tcp-address required"),
    (to_nsq, ("--nsqd-tcp-address=a:1",), "--topic required"),
]


@pytest.mark.parametrize("tool, argv, names", BAD_COMMAND_LINES,
                         ids=[f"{t.PROGRAM}:{' '.join(a[-1:])}" for t, a, _ in BAD_COMMAND_LINES])
def test_a_bad_command_line_exits_2_naming_the_flag(tool: Any, argv: tuple[str, ...], names: str,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    assert tool.main(list(argv)) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith(f"{tool.PROGRAM}: ") and names in captured.err
    assert len(captured.err.strip().splitlines()) == 1


def test_the_process_exits_2_on_an_unknown_flag() -> None:
    result = run_tool("tail", "--topic=t", "--no-such-flag")
    assert result.returncode == 2
    assert b"flag provided but not defined: -no-such-flag" in result.stderr


@pytest.mark.parametrize("tool", [nsq_tail, nsq_stat, to_nsq])
def test_version_and_help(tool: Any, capsys: pytest.CaptureFixture[str]) -> None:
    assert tool.main(["--version"]) == 0
    assert capsys.readouterr().out.startswith(f"{tool.PROGRAM} v")
    assert tool.main(["-h"]) == 0
    assert "-topic" in capsys.readouterr().err


# -- the pure parts ----------------------------------------------------------------------------------
def test_records_split_at_the_delimiter_across_chunks() -> None:
    records = DelimitedRecords(b",")
    assert records.feed(b"ab,c") == [b"ab"]
    assert records.feed(b"d,,") == [b"cd"]  # a record split over two reads; an empty one dropped
    assert records.feed(b"e") == []
    assert records.finish() == [b"e"]  # the last record needs no delimiter after it
    assert records.finish() == []
    with pytest.raises(ValueError):
        DelimitedRecords(b"\r\n")


def test_stat_rows_sum_nodes_and_rate_over_the_interval() -> None:
    node = {"topics": [{"topic_name": "t", "channels": [
        {"channel_name": "c", "depth": 30, "backend_depth": 10, "in_flight_count": 2, "deferred_count": 1,
         "requeue_count": 4, "timeout_count": 5, "message_count": 100, "client_count": 2},
        {"channel_name": "other", "depth": 999, "message_count": 999}]}]}
    other_node = {"topics": [{"topic_name": "t", "channels": [
        {"channel_name": "c", "depth": 5, "backend_depth": 0, "message_count": 20, "clients": [{}, {}, {}]}]}]}
    total = channel_totals([node, other_node], "t", "c")
    assert total == ChannelTotals(depth=35, memory_depth=25, backend_depth=10, in_flight=2, deferred=1,
                                  requeued=4, timed_out=5, messages=120, clients=5)
    assert channel_totals([node], "t", "missing") is None
    assert header_lines() == STAT_HEADER

    earlier = ChannelTotals(depth=20, messages=50)
    # 70 received in 2s = 35/s in; the depth grew by 15, so 55 left = 27.5/s, truncated
    assert row(earlier, total, 2.0) == (
        "     35      27 |      35      25      10     2     1 |       4       5          120       5")
    assert row(total, earlier, 2.0).split()[:2] == ["-35", "-27"]  # counters reset: truncated towards 0


def test_passthrough_options_take_both_forms_and_the_tools_own_flags_win() -> None:
    assert parse_config_options(["max_attempts=10", "heartbeat_interval,5s", "snappy", "auth_secret=a=b,c"],
                                "consumer-opt") == {"max_attempts": "10", "heartbeat_interval": "5s",
                                                    "snappy": True, "auth_secret": "a=b,c"}
    config = build_config(["max_in_flight=50", "user_agent=mine/1", "msg_timeout=90s"], "consumer-opt",
                          defaults={"user_agent": "nsq_tail/x"}, overrides={"max_in_flight": 3})
    assert isinstance(config, Config)
    assert (config.max_in_flight, config.user_agent, config.msg_timeout) == (3, "mine/1", 90.0)
    with pytest.raises(FlagError, match="invalid values for flag -consumer-opt: deflate and snappy"):
        build_config(["deflate", "snappy"], "consumer-opt")


async def test_pacer_spaces_starts_at_the_rate() -> None:
    loop = asyncio.get_running_loop()
    pacer = Pacer(50)
    began = loop.time()
    for _ in range(6):
        await pacer.wait()
    assert loop.time() - began >= 5 / 50 - 0.005  # five gaps of 20ms after the first start
    unlimited = Pacer(0)
    began = loop.time()
    for _ in range(1000):
        await unlimited.wait()
    assert loop.time() - began < 0.5
