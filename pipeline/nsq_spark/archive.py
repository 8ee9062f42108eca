"""The archive job: a topic/channel written to Parquet, partitioned by the date and hour
(UTC) at which each message was published, with a checkpoint. NSQ's nsq_to_file, scaled
out: several copies on one channel share its messages, as any NSQ consumers do.

The partition comes from the message's own timestamp, not from the time of writing, so a
message delivered twice lands in the same partition both times.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from .options import SourceOptions, parse_options
from .source import register

PARTITION_COLUMNS = ("date", "hour")

# How the archive's Parquet files are encoded (Hadoop options of the file sink). Every
# message has its own ID and, as a rule, its own body: a dictionary of them is as large
# as the column and only costs hashing every value (Parquet gives up on it after the
# first page anyway). The other columns (address, topic, channel, attempts) repeat and
# keep their dictionaries.
PARQUET_OPTIONS = {
    "parquet.enable.dictionary#id": "false",
    "parquet.enable.dictionary#body": "false",
}


@dataclass(frozen=True)
class ArchiveJob:
    source_options: Mapping[str, str]   # options of format("nsq"), Spark-style strings
    output: str                         # where the Parquet files go (any Hadoop path)
    checkpoint: str
    trigger: str | None = None          # processing-time trigger ("10 seconds"); None: as fast as it goes
    query_name: str | None = None

    def check(self) -> SourceOptions:
        """The source options, parsed (raises :class:`OptionError` naming a bad one)."""
        return parse_options(SourceOptions, self.source_options)


def with_partition_columns(stream: DataFrame, session_time_zone: str) -> DataFrame:
    """``date`` (``yyyy-MM-dd``) and ``hour`` (``HH``) of each message's timestamp in UTC."""
    utc = F.to_utc_timestamp(F.col("timestamp"), session_time_zone)
    return (stream.withColumn("date", F.date_format(utc, "yyyy-MM-dd"))
                  .withColumn("hour", F.date_format(utc, "HH")))


def start_archive(spark: SparkSession, job: ArchiveJob) -> StreamingQuery:
    job.check()
    register(spark)
    stream = spark.readStream.format("nsq").options(**job.source_options).load()
    rows = with_partition_columns(stream, spark.conf.get("spark.sql.session.timeZone") or "UTC")
    writer = (rows.writeStream.format("parquet").options(**PARQUET_OPTIONS)
              .option("path", job.output)
              .option("checkpointLocation", job.checkpoint)
              .partitionBy(*PARTITION_COLUMNS))
    if job.trigger:
        writer = writer.trigger(processingTime=job.trigger)
    if job.query_name:
        writer = writer.queryName(job.query_name)
    return writer.start()
