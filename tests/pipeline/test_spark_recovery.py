"""At least once across the ways a query ends: killed hard and restarted from its
checkpoint, left idle, drained and stopped."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path

import pytest

from nsq_spark import DrainSignal
from nsq_spark.archive import ArchiveJob, start_archive
from tests.pipeline.conftest import FAST_JVM
from tests.pipeline.nsq_helpers import bodies, channel_counts, publish
from tests.pipeline.spark_helpers import parquet_bodies, settled, while_running
from tests.servers import wait_for

pytestmark = pytest.mark.spark

TOPIC, CHANNEL = "orders", "archive"


def committed_batches(checkpoint: Path) -> int:
    commits = checkpoint / "commits"
    return sum(1 for f in commits.iterdir() if f.name.isdigit()) if commits.is_dir() else 0


def test_a_query_killed_mid_stream_restarts_from_its_checkpoint(spark, servers, tmp_path: Path) -> None:
    nsqd = servers.nsqd(msg_timeout="3s")  # what the killed query held comes back 3 s later
    sent = bodies(6000)
    publish(nsqd, TOPIC, sent)
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    options = {"nsqd_tcp_addresses": nsqd.tcp_address, "topic": TOPIC, "channel": CHANNEL,
               "max_messages_per_batch": "400", "max_in_flight": "1000"}
    argv = [sys.executable, "-m", "nsq_spark.cli", "archive", "--master", "local[2]",
            "--topic", TOPIC, "--channel", CHANNEL, "--nsqd-tcp-address", nsqd.tcp_address,
            "--max-messages-per-batch", "400", "--max-in-flight", "1000",
            "--output", str(out), "--checkpoint", str(checkpoint),
            "--conf", "spark.ui.enabled=false", "--conf", "spark.ui.showConsoleProgress=false",
            "--conf", "spark.sql.session.timeZone=UTC", "--conf", f"spark.driver.extraJavaOptions={FAST_JVM}"]
    log_path = tmp_path / "archive.log"
    with open(log_path, "wb") as log:
        job = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                               start_new_session=True, env={**os.environ, "PYSPARK_PYTHON": sys.executable})
    try:
        def mid_stream() -> bool:
            assert job.poll() is None, f"the job exited with {job.returncode}:\n{log_path.read_text()[-3000:]}"
            return committed_batches(checkpoint) >= 2  # the first batch is empty, the second is not
        wait_for(mid_stream, timeout=150, interval=0.1, message="two batches committed")
        os.killpg(job.pid, signal.SIGKILL)
        job.wait(10)
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
            job.wait(10)
    at_kill = channel_counts(nsqd, TOPIC, CHANNEL)
    assert at_kill["depth"] + at_kill["in_flight_count"] > 0, "killed after the end of the stream"

    query = start_archive(spark, ArchiveJob(options, str(out), str(checkpoint)))
    try:
        while_running(query, lambda: settled(nsqd, TOPIC, CHANNEL, len(sent)), 120, "every message FINed")
    finally:
        query.stop()
    written = Counter(parquet_bodies(spark, str(out)))
    assert set(written) == set(sent)
    duplicates = sum(written.values()) - len(written)
    print(f"killed with {at_kill['in_flight_count']} in flight: {duplicates} duplicates after restart")
    assert duplicates <= 1000  # at most what the killed reader held (max_in_flight)


def test_an_idle_stream_and_a_drained_stop_redeliver_nothing(spark, servers, tmp_path: Path) -> None:
    nsqd = servers.nsqd(msg_timeout="3s")
    drain = DrainSignal(tmp_path / "drain")
    out, checkpoint = str(tmp_path / "out"), str(tmp_path / "checkpoint")
    options = {"nsqd_tcp_addresses": nsqd.tcp_address, "topic": TOPIC, "channel": CHANNEL,
               "max_messages_per_batch": "250", "max_in_flight": "500", "drain_file": str(drain.path)}
    first, second = bodies(500, "first"), bodies(4000, "second")
    publish(nsqd, TOPIC, first)
    query = start_archive(spark, ArchiveJob(options, out, checkpoint))
    try:
        # idle after the last message: the empty batch commits it, nothing stays in flight
        while_running(query, lambda: settled(nsqd, TOPIC, CHANNEL, len(first)), 90, "first FINed")
        publish(nsqd, TOPIC, second)
        while_running(query, lambda: len(parquet_bodies(spark, out)) > len(first), 60, "some of the second")
        drain.request()
        while_running(query, drain.is_drained, 60, "drained")
    finally:
        query.stop()
    counts = channel_counts(nsqd, TOPIC, CHANNEL)
    assert counts["in_flight_count"] == 0 and counts["timeout_count"] == 0
    assert counts["depth"] > 0, "the drain came after the end of the stream"
    written = parquet_bodies(spark, out)
    assert len(written) == len(set(written))

    drain.clear()
    query = start_archive(spark, ArchiveJob(options, out, checkpoint))
    try:
        while_running(query, lambda: settled(nsqd, TOPIC, CHANNEL, len(first) + len(second)), 90,
                      "the rest FINed")
    finally:
        query.stop()
    written = parquet_bodies(spark, out)
    assert sorted(written) == sorted(first + second)  # every message once: nothing came back
    assert channel_counts(nsqd, TOPIC, CHANNEL)["timeout_count"] == 0


def test_the_archive_command_drains_on_sigterm_and_exits_0(spark, servers, tmp_path: Path) -> None:
    from nsq_spark import cli
    nsqd = servers.nsqd()
    sent = bodies(3000)
    publish(nsqd, TOPIC, sent)
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    argv = ["archive", "--topic", TOPIC, "--channel", CHANNEL, "--nsqd-tcp-address", nsqd.tcp_address,
            "--max-messages-per-batch", "200", "--max-in-flight", "400",
            "--output", str(out), "--checkpoint", str(checkpoint)]

    def terminate_mid_stream() -> None:
        wait_for(lambda: committed_batches(checkpoint) >= 3, timeout=90, interval=0.1,
                 message="two batches with rows committed")
        os.kill(os.getpid(), signal.SIGTERM)
    terminator = threading.Thread(target=terminate_mid_stream, daemon=True)
    terminator.start()
    code = cli.main(argv)  # runs in the test's session; SIGTERM is its own until it returns
    terminator.join(5)

    assert code == 0
    counts = channel_counts(nsqd, TOPIC, CHANNEL)
    written = parquet_bodies(spark, str(out))
    assert counts["in_flight_count"] == 0 and counts["depth"] > 0  # drained mid-stream
    assert len(set(written)) == len(written)
    assert len(written) + counts["depth"] == len(sent)  # nothing both written and queued again
