"""The connector on a real Spark cluster: a standalone master and worker (separate JVMs
on 127.0.0.1), executors in their own JVM, the driver in this process or started by
``spark-submit``. One cluster and one session serve the whole module (JVM starts are the
cost here)."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from nsq_spark.archive import ArchiveJob, start_archive
from tests.pipeline.conftest import FAST_JVM
from tests.pipeline.nsq_helpers import bodies, channel_counts, publish
from tests.pipeline.spark_helpers import consume_bodies, parquet_bodies, settled, while_running
from tests.pipeline.standalone import SPARK_HOME, StandaloneCluster, children_of
from tests.servers import HOST, wait_for

pytestmark = [pytest.mark.spark, pytest.mark.spark_cluster]

README = Path(__file__).resolve().parents[2] / "pipeline" / "README.md"
CHANNEL = "archive"


def test_executors_publish_a_dataframe(cluster_spark, standalone: StandaloneCluster, servers) -> None:
    nsqd = servers.nsqd()
    rows = cluster_spark.range(10_000).selectExpr("format_string('row-%05d', id) AS body")
    (rows.repartition(4).write.format("nsq").mode("append")
     .option("nsqd_tcp_addresses", nsqd.tcp_address).option("topic", "from-executors").save())
    assert standalone.executor_pids(), "no executor JVM on the worker: the rows were published elsewhere"
    assert nsqd.topic("from-executors")["message_count"] == 10_000
    received = consume_bodies(nsqd, "from-executors", "check", 10_000, timeout=60)
    assert sorted(received) == [f"row-{i:05d}".encode() for i in range(10_000)]


def test_the_archive_job_end_to_end(cluster_spark, servers, tmp_path: Path) -> None:
    lookupd = servers.lookupd()
    nsqds = [servers.nsqd(lookupd_tcp_address=lookupd.tcp_address, max_rdy_count=10_000) for _ in range(2)]
    sent = {n.tcp_address: bodies(3000, f"node{i}") for i, n in enumerate(nsqds)}
    for nsqd in nsqds:
        publish(nsqd, "orders", sent[nsqd.tcp_address])
    wait_for(lambda: len(lookupd.producers("orders")) == 2, message="lookupd lists both nsqds")
    job = ArchiveJob({"lookupd_http_addresses": lookupd.http_address, "topic": "orders", "channel": CHANNEL,
                      "max_in_flight": "10000", "max_messages_per_batch": "3000"},
                     output=str(tmp_path / "out"), checkpoint=str(tmp_path / "checkpoint"))
    query = start_archive(cluster_spark, job)
    try:
        while_running(query, lambda: all(settled(n, "orders", CHANNEL, 3000) for n in nsqds), 120,
                      "both nsqds' messages FINed")
    finally:
        query.stop()
    rows = cluster_spark.read.parquet(job.output).select("body", "nsqd_address").collect()
    assert sorted(bytes(r.body) for r in rows) == sorted(b for sent_here in sent.values() for b in sent_here)
    for row in rows:  # each message came from the nsqd it was published to
        assert bytes(row.body) in set(sent[row.nsqd_address])


def test_the_archive_job_survives_its_executor_killed_mid_stream(cluster_spark, standalone: StandaloneCluster,
                                                                 servers, tmp_path: Path) -> None:
    nsqd = servers.nsqd(max_rdy_count=10_000)
    sent = bodies(8000)
    publish(nsqd, "events", sent)
    job = ArchiveJob({"nsqd_tcp_addresses": nsqd.tcp_address, "topic": "events", "channel": CHANNEL,
                      "max_in_flight": "2000", "max_messages_per_batch": "1000"},
                     output=str(tmp_path / "out"), checkpoint=str(tmp_path / "checkpoint"))
    query = start_archive(cluster_spark, job)
    try:
        while_running(query, lambda: len([p for p in query.recentProgress if p["numInputRows"]]) >= 2, 90,
                      "two batches with rows")
        executors = standalone.executor_pids()
        assert len(executors) == 1, executors
        os.kill(executors[0], signal.SIGKILL)
        at_kill = channel_counts(nsqd, "events", CHANNEL)
        assert at_kill["depth"] + at_kill["in_flight_count"] > 0, "killed after the end of the stream"
        while_running(query, lambda: settled(nsqd, "events", CHANNEL, len(sent)), 180,
                      "every message FINed after the executor came back")
        replaced = standalone.executor_pids()
    finally:
        query.stop()
    assert replaced and replaced != executors, "the worker did not start a new executor"
    written = Counter(parquet_bodies(cluster_spark, job.output))
    assert set(written) == set(sent)  # every published message is in the Parquet output
    print(f"executor killed with {at_kill['in_flight_count']} in flight: "
          f"{sum(written.values()) - len(written)} duplicates")


def readme_launcher() -> str:
    """The launcher exactly as the README's ``printf`` writes it."""
    match = re.search(r"^printf '(.*)' > nsq_archive\.py$", README.read_text(), re.MULTILINE)
    assert match, "the README no longer shows the printf launcher"
    return match.group(1).replace("\\n", "\n")


@pytest.mark.slow  # a second driver JVM and executor JVM: the heaviest of the module
def test_the_archive_job_submitted_with_the_readme_launcher(standalone: StandaloneCluster, cluster_spark,
                                                            servers, tmp_path: Path) -> None:
    nsqd = servers.nsqd()
    sent = bodies(3000)
    publish(nsqd, "submitted", sent)
    launcher = tmp_path / "nsq_archive.py"
    launcher.write_text(readme_launcher())
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    argv = [str(SPARK_HOME / "bin" / "spark-submit"), "--master", standalone.url,
            "--conf", f"spark.pyspark.python={sys.executable}",
            "--conf", f"spark.pyspark.driver.python={sys.executable}",
            "--conf", f"spark.driver.host={HOST}", "--conf", f"spark.driver.bindAddress={HOST}",
            "--conf", "spark.ui.enabled=false", "--conf", "spark.cores.max=1",
            "--conf", "spark.executor.memory=512m",
            "--conf", f"spark.driver.extraJavaOptions={FAST_JVM}",
            "--conf", f"spark.executor.extraJavaOptions={FAST_JVM}",
            str(launcher), "archive", "--topic", "submitted", "--channel", CHANNEL,
            "--nsqd-tcp-address", nsqd.tcp_address, "--max-in-flight", "5000",
            "--output", str(out), "--checkpoint", str(checkpoint)]
    log_path = tmp_path / "submit.log"
    with open(log_path, "wb") as log:
        job = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                               env={**os.environ, "SPARK_LOCAL_IP": HOST}, start_new_session=True)
    try:
        def archived() -> bool:
            assert job.poll() is None, f"spark-submit exited with {job.returncode}:\n{log_path.read_text()[-3000:]}"
            return settled(nsqd, "submitted", CHANNEL, len(sent))
        wait_for(archived, timeout=180, interval=0.2, message="every message archived and FINed")
        driver = python_driver_of(job.pid)
        os.kill(driver, signal.SIGTERM)  # the job's own drain-and-exit, as on a pod's stop
        code = job.wait(120)
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
            job.wait(10)
    assert code == 0, log_path.read_text()[-3000:]
    written = parquet_bodies(cluster_spark, str(out))
    assert sorted(written) == sent


def python_driver_of(submit_pid: int) -> int:
    """spark-submit runs a Python application as a child of its JVM: that process."""
    drivers = wait_for(lambda: children_of(submit_pid, b"nsq_archive.py"), timeout=30,
                       interval=0.1, message="the Python driver under spark-submit")
    return drivers[0]
