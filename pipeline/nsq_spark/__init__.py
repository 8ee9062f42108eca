"""nsq_spark: NSQ topics as Spark streams (at least once) and DataFrames published to NSQ.

    from nsq_spark import register
    register(spark)
    stream = (spark.readStream.format("nsq")
              .option("nsqd_tcp_addresses", "127.0.0.1:4150").option("topic", "events")
              .option("channel", "spark").load())
    df.write.format("nsq").mode("append").option("nsqd_tcp_addresses", "127.0.0.1:4150") \
        .option("topic", "events").save()

Options: :mod:`nsq_spark.options`. A message is FINed only after Spark committed the
micro-batch that holds it.
"""
from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

# Each name is imported from its module on first use, so that importing the package (as
# the nsq-spark command does before it parses its arguments) needs neither PySpark nor
# pyarrow: they come with the `spark` extra, or with the Spark that runs the job.
_HOMES = {
    "DrainSignal": "drain", "NsqSourceError": "feed", "OptionError": "options", "SinkOptions": "options",
    "SourceOptions": "options", "SCHEMA_DDL": "schema", "NsqDataSource": "source", "register": "source",
}

__all__ = sorted(_HOMES)


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f".{home}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_HOMES])


if TYPE_CHECKING:
    from .drain import DrainSignal
    from .feed import NsqSourceError
    from .options import OptionError, SinkOptions, SourceOptions
    from .schema import SCHEMA_DDL
    from .source import NsqDataSource, register
