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
from .drain import DrainSignal
from .feed import NsqSourceError
from .options import OptionError, SinkOptions, SourceOptions
from .schema import SCHEMA_DDL
from .source import NsqDataSource, register

__all__ = ["DrainSignal", "NsqDataSource", "NsqSourceError", "OptionError", "SCHEMA_DDL",
           "SinkOptions", "SourceOptions", "register"]
