"""``spark.readStream.format("nsq")`` in Spark local[2] against real nsqd processes."""
from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.errors import StreamingQueryException

from nsq_spark.archive import ArchiveJob, start_archive
from tests.pipeline.nsq_helpers import bodies, channel_counts, publish
from tests.pipeline.spark_helpers import settled, while_running
from tests.servers import wait_for

pytestmark = pytest.mark.spark

TOPIC, CHANNEL = "events", "archive"


def test_ten_thousand_messages_into_parquet_every_id_present(spark, servers, tmp_path: Path) -> None:
    nsqd = servers.nsqd(max_rdy_count=5000)
    sent = bodies(10_000)
    publish(nsqd, TOPIC, sent)
    job = ArchiveJob({"nsqd_tcp_addresses": nsqd.tcp_address, "topic": TOPIC, "channel": CHANNEL,
                      "max_in_flight": "5000", "max_messages_per_batch": "2500"},
                     output=str(tmp_path / "out"), checkpoint=str(tmp_path / "checkpoint"))
    query = start_archive(spark, job)
    try:
        # a message is FINed only once the batch holding it is in the Parquet sink
        while_running(query, lambda: settled(nsqd, TOPIC, CHANNEL, len(sent)), 120,
                      "every message FINed")
        batches = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
    finally:
        query.stop()
    written = spark.read.schema("id string, body binary, date string, hour string") \
        .parquet(job.output).collect()
    assert sorted(bytes(r.body) for r in written) == sent
    assert len({r.id for r in written}) == len(sent)
    assert max(batches) <= 2500 and sum(batches) == len(sent)
    partitions = {(r.date, r.hour) for r in written}
    assert all(len(d) == 10 and len(h) == 2 for d, h in partitions)
    assert all((Path(job.output) / f"date={d}" / f"hour={h}").is_dir() for d, h in partitions)
    assert channel_counts(nsqd, TOPIC, CHANNEL)["timeout_count"] == 0


def test_two_nsqds_through_lookupd(spark, servers) -> None:
    lookupd = servers.lookupd()
    nsqds = [servers.nsqd(lookupd_tcp_address=lookupd.tcp_address) for _ in range(2)]
    for i, nsqd in enumerate(nsqds):
        publish(nsqd, "spread", bodies(500, f"node{i}"))
    wait_for(lambda: len(lookupd.producers("spread")) == 2, message="lookupd lists both nsqds")
    query = (spark.readStream.format("nsq").option("lookupd_http_addresses", lookupd.http_address)
             .option("topic", "spread").option("channel", CHANNEL).load()
             .writeStream.format("memory").queryName("spread").start())
    try:
        while_running(query, lambda: all(settled(n, "spread", CHANNEL, 500) for n in nsqds), 60,
                      "both nsqds drained")
    finally:
        query.stop()
    rows = spark.sql("select body, nsqd_address from spread").collect()
    assert sorted(bytes(r.body) for r in rows) == sorted(bodies(500, "node0") + bodies(500, "node1"))
    assert {r.nsqd_address for r in rows} == {n.tcp_address for n in nsqds}


def test_a_missing_option_fails_the_query_naming_it(spark, servers) -> None:
    nsqd = servers.nsqd()
    query = (spark.readStream.format("nsq").option("nsqd_tcp_addresses", nsqd.tcp_address)
             .option("topic", TOPIC).option("maxInFlight", "0").load()
             .writeStream.format("memory").queryName("broken").start())
    try:
        with pytest.raises(StreamingQueryException) as failure:
            query.awaitTermination(60)
    finally:
        query.stop()
    message = str(failure.value)
    assert "nsq option 'channel' is required" in message
    assert "nsq option 'max_in_flight'" in message
