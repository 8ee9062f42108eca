"""``spark.readStream.format("nsq")`` in Spark local[2] against real nsqd processes."""
from __future__ import annotations

import threading
import time
from datetime import datetime, timezone
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from pyspark.errors import StreamingQueryException
from pyspark.sql import DataFrame

from nsq_spark.archive import ArchiveJob, start_archive
from tests.pipeline.nsq_helpers import bodies, channel_counts, publish
from tests.pipeline.spark_helpers import ARCHIVE_DDL, settled, while_running
from tests.servers import wait_for

pytestmark = pytest.mark.spark

TOPIC, CHANNEL = "events", "archive"


def test_ten_thousand_messages_into_parquet_every_id_present(spark, servers, tmp_path: Path) -> None:
    nsqd = servers.nsqd(max_rdy_count=5000)
    sent = bodies(10_000)
    published_from = time.time()
    publish(nsqd, TOPIC, sent)
    published_by = time.time()
    job = ArchiveJob({"nsqd_tcp_addresses": nsqd.tcp_address, "topic": TOPIC, "channel": CHANNEL,
                      "max_in_flight": "5000", "max_messages_per_batch": "2500"},
                     output=str(tmp_path / "out"), checkpoint=str(tmp_path / "checkpoint"))
    # a session 5:30 off UTC: partitions must still be the UTC date and hour
    spark.conf.set("spark.sql.session.timeZone", "Asia/Kolkata")
    try:
        query = start_archive(spark, job)
    finally:
        spark.conf.set("spark.sql.session.timeZone", "UTC")
    try:
        # a message is FINed only once the batch holding it is in the Parquet sink
        while_running(query, lambda: settled(nsqd, TOPIC, CHANNEL, len(sent)), 120,
                      "every message FINed")
        batches = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
    finally:
        query.stop()
    written = spark.read.schema(ARCHIVE_DDL).parquet(job.output) \
        .selectExpr("id", "body", "unix_micros(timestamp) AS micros", "date", "hour").collect()
    assert sorted(bytes(r.body) for r in written) == sent
    assert len({r.id for r in written}) == len(sent)
    assert max(batches) <= 2500 and sum(batches) == len(sent)
    for row in written:  # date and hour come from the row's date=/hour= directories
        published = datetime.fromtimestamp(row.micros / 1e6, timezone.utc)
        assert published_from - 1 <= published.timestamp() <= published_by + 1, row
        assert (row.date, row.hour) == (published.strftime("%Y-%m-%d"), published.strftime("%H")), row
    assert channel_counts(nsqd, TOPIC, CHANNEL)["timeout_count"] == 0
    # timestamps (all but unique) are written plain, the columns that repeat with a dictionary
    encodings = column_encodings(Path(job.output))
    assert not encodings["timestamp"] & DICTIONARY, encodings
    assert encodings["nsqd_address"] & DICTIONARY and encodings["topic"] & DICTIONARY, encodings


DICTIONARY = {"PLAIN_DICTIONARY", "RLE_DICTIONARY"}


def column_encodings(output: Path) -> dict[str, set[str]]:
    """Every encoding each column uses in any of the Parquet files under ``output``."""
    found: dict[str, set[str]] = {}
    files = list(output.rglob("*.parquet"))
    assert files
    for path in files:
        metadata = pq.ParquetFile(path).metadata
        for g in range(metadata.num_row_groups):
            for c in range(metadata.num_columns):
                column = metadata.row_group(g).column(c)
                found.setdefault(column.path_in_schema, set()).update(column.encodings)
    return found


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


def test_losing_the_nsqd_that_holds_uncommitted_messages_fails_the_query(spark, servers) -> None:
    nsqd = servers.nsqd()
    publish(nsqd, "held", bodies(20))
    in_batch, release = threading.Event(), threading.Event()

    def hold_the_first_batch(batch: DataFrame, batch_id: int) -> None:
        if batch.count():
            in_batch.set()
            release.wait(60)  # nothing of this query is FINed until this returns
    query = (spark.readStream.format("nsq").option("nsqd_tcp_addresses", nsqd.tcp_address)
             .option("topic", "held").option("channel", CHANNEL)
             .option("max_in_flight", "20").option("max_messages_per_batch", "5").load()
             .writeStream.foreachBatch(hold_the_first_batch).start())
    try:
        while_running(query, in_batch.is_set, 90, "a batch with rows")
        # the reader holds all 20, at most 5 of them in the running batch: messages in no
        # batch yet are on the lost connection whenever the reader notices the loss
        wait_for(lambda: channel_counts(nsqd, "held", CHANNEL)["in_flight_count"] == 20,
                 message="every message delivered to the reader")
        nsqd.kill()
        release.set()
        with pytest.raises(StreamingQueryException):
            query.awaitTermination(60)
        reason = str(query.exception())
    finally:
        release.set()
        query.stop()
    assert f"{nsqd.tcp_address}: connection lost holding" in reason
