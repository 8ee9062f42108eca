"""Fixtures of the pipeline tests: readers driven without a JVM, and one SparkSession
(local[2]) shared by every Spark test of the run."""
from __future__ import annotations

import os
import sys
from typing import Iterator

import pytest

from tests.pipeline.nsq_helpers import open_reader  # noqa: F401  (fixture)


# a quicker JVM start for short tests: the client compiler only, serial GC
FAST_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "spark: starts Spark (a JVM) in local[2]")


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # workers need this venv
    from pyspark.sql import SparkSession

    from nsq_spark import register
    session = (SparkSession.builder.master("local[2]").appName("nsq-spark-tests")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.driver.extraJavaOptions", FAST_JVM)
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    yield session
    session.stop()
