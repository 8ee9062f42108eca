"""The ``nsq`` data source: a stream reader and batch/stream writers over NSQ topics."""
from __future__ import annotations

from pyspark.sql import SparkSession
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceStreamReader,
    DataSourceStreamWriter,
)
from pyspark.sql.types import StructType

from .options import OptionError, SinkOptions, SourceOptions, parse_options
from .reader import NsqStreamReader
from .schema import SCHEMA_DDL
from .writer import NsqArrowWriter, NsqStreamArrowWriter, check_body_column


class NsqDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "nsq"

    def schema(self) -> str:
        return SCHEMA_DDL

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return NsqStreamReader(parse_options(SourceOptions, self.options))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceArrowWriter:
        return NsqArrowWriter(self._sink_options(schema, overwrite))

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        return NsqStreamArrowWriter(self._sink_options(schema, overwrite))

    def _sink_options(self, schema: StructType, overwrite: bool) -> SinkOptions:
        if overwrite:
            raise OptionError("an NSQ topic cannot be overwritten: write with mode 'append'")
        options = parse_options(SinkOptions, self.options)
        check_body_column(schema, options)
        return options


def register(spark: SparkSession) -> None:
    """Make ``format("nsq")`` available in ``spark``."""
    spark.dataSource.register(NsqDataSource)
