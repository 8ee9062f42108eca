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

# How the archive's Parquet files are encoded (Hadoop options of the file sink). Spark
# writes a timestamp as a 12-byte INT96, and Parquet keeps a dictionary for that column
# even when, as here, nearly every value is new: the dictionary is as large as the column
# and hashing every value into it was about a third of the JVM's Parquet writing (0.27 ->
# 0.17 CPU s per 100k rows without it). The ID and body columns need no such option:
# Parquet drops their dictionaries after the first page by itself. Columns that repeat
# (address, topic, channel, attempts) keep theirs.
PARQUET_OPTIONS = {
    "parquet.enable.dictionary#timestamp": "false",
}

# Spark settings of the archive job's session (``nsq-spark archive`` sets them; ``--conf``
# overrides them). Spark's default checkpoint file manager writes the offset, commit and
# sink logs through Hadoop's FileContext, which on a local file system (Hadoop's native
# library is not in pyspark) starts a ``readlink`` or ``chmod`` process for every step of
# every log write: about 15 process starts per micro-batch from the driver's JVM. The
# FileSystem-based manager (Spark's own, used wherever FileContext is missing) writes
# the same temporary file and renames it with the file system's rename, atomic on local
# file systems and HDFS; nothing is forked.
SESSION_CONF = {
    "spark.sql.streaming.checkpointFileManagerClass":
        "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager",
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
