"""The nsq-spark console script, started through :func:`nsq_protocol.launch.launch`:
without PySpark (or pyarrow) it says to install the ``spark`` extra, or to run where
Spark provides them, instead of a traceback."""
from __future__ import annotations

from nsq_protocol.launch import launch

EXTRAS = {"pyspark": "nsq-spark[spark]", "pyarrow": "nsq-spark[spark]"}


def nsq_spark() -> int:
    return launch("nsq-spark", "nsq_spark.cli:main", "nsq-spark", EXTRAS)
