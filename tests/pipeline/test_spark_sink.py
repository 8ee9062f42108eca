"""``df.write.format("nsq")`` and ``df.writeStream.format("nsq")`` in Spark local[2]."""
from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import functions as F

from tests.pipeline.nsq_helpers import bodies, publish
from tests.pipeline.spark_helpers import consume_bodies, settled, while_running
from tests.servers import free_port

pytestmark = pytest.mark.spark


def test_a_hundred_thousand_rows_published_and_consumed_back(spark, servers) -> None:
    nsqd = servers.nsqd()
    rows = spark.range(100_000).selectExpr("format_string('row-%06d', id) AS body", "id")
    (rows.repartition(4).write.format("nsq").mode("append")
     .option("nsqd_tcp_addresses", nsqd.tcp_address).option("topic", "sunk")
     .option("max_mpub_messages", "500").save())
    assert nsqd.topic("sunk")["message_count"] == 100_000
    received = consume_bodies(nsqd, "sunk", "check", 100_000, timeout=120)
    assert sorted(received) == [f"row-{i:06d}".encode() for i in range(100_000)]


def test_a_stream_from_one_topic_into_another(spark, servers, tmp_path: Path) -> None:
    nsqd = servers.nsqd()
    publish(nsqd, "raw", bodies(1000))
    query = (spark.readStream.format("nsq").option("nsqd_tcp_addresses", nsqd.tcp_address)
             .option("topic", "raw").option("channel", "upper").load()
             .select(F.upper(F.col("body").cast("string")).alias("body"))
             .writeStream.format("nsq").option("nsqd_tcp_addresses", nsqd.tcp_address)
             .option("topic", "shouted").option("checkpointLocation", str(tmp_path / "checkpoint"))
             .start())
    try:
        while_running(query, lambda: settled(nsqd, "raw", "upper", 1000), 60, "raw consumed")
    finally:
        query.stop()
    received = consume_bodies(nsqd, "shouted", "check", 1000, timeout=30)
    assert sorted(received) == sorted(b.upper() for b in bodies(1000))


def test_a_publish_no_nsqd_accepts_fails_the_write(spark) -> None:
    rows = spark.createDataFrame([(b"one",), (b"two",)], "body binary")
    with pytest.raises(Exception, match="no nsqd accepted the publish"):
        (rows.write.format("nsq").mode("append").option("nsqd_tcp_addresses", f"127.0.0.1:{free_port()}")
         .option("topic", "nowhere").save())


def test_the_body_column_must_exist_and_be_binary_or_string(spark, servers) -> None:
    nsqd = servers.nsqd()
    numbers = spark.range(3)
    writer = numbers.write.format("nsq").mode("append").option("nsqd_tcp_addresses", nsqd.tcp_address) \
        .option("topic", "typed")
    with pytest.raises(Exception, match="nsq option 'body_column': no column 'body'"):
        writer.save()
    with pytest.raises(Exception, match="column 'id' is bigint, it must be binary or string"):
        writer.option("body_column", "id").save()
    with pytest.raises(Exception, match="cannot be overwritten"):
        numbers.selectExpr("CAST(id AS STRING) AS body").write.format("nsq").mode("overwrite") \
            .option("nsqd_tcp_addresses", nsqd.tcp_address).option("topic", "typed").save()
    assert nsqd.topic("typed") is None
