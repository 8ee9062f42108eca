"""Fixtures of the pipeline tests: readers driven without a JVM, one SparkSession
(local[2]) shared by the Spark tests of a test process, and a Spark standalone cluster
(a master and a worker) shared by the cluster tests of a module.

A process holds one SparkContext at a time: the cluster's session replaces the local one
for the cluster tests, and the local one comes back for the next test that asks for it.
Every JVM binds to 127.0.0.1.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Iterator

import pytest

from tests.pipeline.nsq_helpers import open_reader  # noqa: F401  (fixture)
from tests.pipeline.standalone import StandaloneCluster, java_missing
from tests.servers import HOST

# a quicker JVM start for short tests: the client compiler only, serial GC
FAST_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"

# Spark would otherwise bind its driver to the machine's external interface
os.environ["SPARK_LOCAL_IP"] = HOST
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # workers need this venv

SESSION_CONF = {
    "spark.driver.host": HOST,
    "spark.driver.bindAddress": HOST,
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "2",
    "spark.sql.session.timeZone": "UTC",
    "spark.driver.extraJavaOptions": FAST_JVM,
}


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "spark: starts Spark (a JVM) in local[2]")
    config.addinivalue_line("markers", "spark_cluster: starts a Spark standalone master and worker")


def new_session(master: str, app_name: str, **conf: str) -> object:
    from pyspark.sql import SparkSession

    from nsq_spark import register
    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in {**SESSION_CONF, **conf}.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    return session


def stop_active_session() -> None:
    from pyspark.sql import SparkSession
    active = SparkSession.getActiveSession()
    if active is not None:
        active.stop()


class LocalSpark:
    """The local[2] session, started on first use and again after a cluster test stopped it."""

    def __init__(self) -> None:
        self.session: object | None = None

    def get(self) -> object:
        from pyspark import SparkContext
        if self.session is None or SparkContext._active_spark_context is None:
            stop_active_session()
            self.session = new_session("local[2]", "nsq-spark-tests")
        return self.session

    def stop(self) -> None:
        if self.session is not None:
            self.session.stop()  # type: ignore[attr-defined]
            self.session = None


@pytest.fixture(scope="session")
def local_spark() -> Iterator[LocalSpark]:
    holder = LocalSpark()
    yield holder
    holder.stop()


@pytest.fixture
def spark(local_spark: LocalSpark) -> object:
    return local_spark.get()


@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneCluster]:
    """A master and a worker on 127.0.0.1, stopped after the module's tests. The worker
    offers 3 cores and 2 GiB: the module's session takes 2 cores, an application that a
    test submits besides it 1."""
    reason = java_missing()
    if reason:
        pytest.skip(reason)
    cluster = StandaloneCluster(tmp_path_factory.mktemp("spark-standalone"), cores=3, worker_memory="2g",
                                daemon_java_options=FAST_JVM)
    cluster.start()
    yield cluster
    cluster.stop()


@pytest.fixture(scope="module")
def cluster_spark(standalone: StandaloneCluster, local_spark: LocalSpark) -> Iterator[object]:
    """A session whose executors run on the standalone cluster's worker."""
    local_spark.stop()
    stop_active_session()
    session = new_session(standalone.url, "nsq-spark-cluster-tests", **{
        "spark.executor.extraJavaOptions": FAST_JVM,
        "spark.executor.cores": "2",
        "spark.cores.max": "2",
        "spark.executor.memory": "512m",
        "spark.pyspark.python": sys.executable,
    })
    yield session
    session.stop()  # type: ignore[attr-defined]


def work_dirs(cluster: StandaloneCluster) -> list[Path]:
    """The worker's application directories (executors' logs), for failure messages."""
    return sorted(cluster.work_dir.glob("app-*")) if cluster.work_dir.is_dir() else []
