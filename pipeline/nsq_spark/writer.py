"""``df.write.format("nsq")`` and ``df.writeStream.format("nsq")``: Arrow writers that
publish one column of every row as an NSQ message. ``write`` runs on the executors;
``commit`` and ``abort`` on the driver. A publish cannot be taken back, so ``abort`` only
reports what the failed batch had already published: Spark runs the batch again and
those messages arrive twice (at least once)."""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Iterator, Optional, Sequence

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import BinaryType, StringType, StructType

from .options import OptionError, SinkOptions
from .publish import arrow_bodies, publish

log = logging.getLogger("nsq_spark")


@dataclass
class Published(WriterCommitMessage):
    messages: int


def check_body_column(schema: StructType, options: SinkOptions) -> None:
    """The body column must exist and be binary or string."""
    column = options.body_column
    if column not in schema.names:
        raise OptionError(f"nsq option 'body_column': no column {column!r} in {schema.names}")
    data_type = schema[column].dataType
    if not isinstance(data_type, (BinaryType, StringType)):
        raise OptionError(f"nsq option 'body_column': column {column!r} is {data_type.simpleString()}, "
                          "it must be binary or string")


def _total(messages: Sequence[Optional[WriterCommitMessage]]) -> int:
    return sum(m.messages for m in messages if isinstance(m, Published))


class NsqArrowWriter(DataSourceArrowWriter):
    def __init__(self, options: SinkOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> Published:
        return Published(publish(arrow_bodies(iterator, self.options.body_column), self.options))

    def commit(self, messages: list[Optional[WriterCommitMessage]]) -> None:
        log.info("published %d messages to %s", _total(messages), self.options.topic)

    def abort(self, messages: list[Optional[WriterCommitMessage]]) -> None:
        log.warning("write to %s failed after %d messages were published by tasks that succeeded",
                    self.options.topic, _total(messages))


class NsqStreamArrowWriter(DataSourceStreamArrowWriter):
    def __init__(self, options: SinkOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> Published:
        return Published(publish(arrow_bodies(iterator, self.options.body_column), self.options))

    def commit(self, messages: list[Optional[WriterCommitMessage]], batchId: int) -> None:
        log.info("batch %d: published %d messages to %s", batchId, _total(messages), self.options.topic)

    def abort(self, messages: list[Optional[WriterCommitMessage]], batchId: int) -> None:
        log.warning("batch %d to %s failed after %d messages were published; Spark runs it again",
                    batchId, self.options.topic, _total(messages))
