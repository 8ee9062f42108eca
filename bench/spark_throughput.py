"""NSQ <-> Spark throughput in local[2]: prints figures, asserts nothing.

    .venv/bin/python bench/spark_throughput.py                    # 200k messages of 200 bytes
    .venv/bin/python bench/spark_throughput.py --messages 1000000 --batch 100000
    .venv/bin/python bench/spark_throughput.py --only nsq_to_noop,spark_to_nsq

Workloads, each against a fresh nsqd (``--max-rdy-count`` and ``--mem-queue-size`` raised
to the message count, as a pipeline's broker should be):

- ``nsq_to_noop``: messages queued in nsqd, then ``readStream.format("nsq")`` into Spark's
  no-op sink; timed from the query's start until nsqd saw every message FINed (which
  happens only after Spark committed the batch holding it).
- ``nsq_to_parquet``: the same into Parquet files.
- ``spark_to_nsq``: ``spark.range(n)`` as 200-byte string bodies, ``write.format("nsq")``.

A small warm-up query runs first so that Spark's first-use costs are not counted.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

from pyspark.sql import SparkSession  # noqa: E402

from nsq_protocol.commands import encode_mpub_body  # noqa: E402
from nsq_spark import register  # noqa: E402
from tests.servers import Nsqd, wait_for  # noqa: E402

TOPIC, CHANNEL = "bench", "spark"
WORKLOADS = ("nsq_to_noop", "nsq_to_parquet", "spark_to_nsq")
SHOW_PROGRESS = False


def body(i: int, size: int) -> bytes:
    head = f"{i:012d}".encode()
    return head + b"x" * (size - len(head))


def fill(nsqd: Nsqd, count: int, size: int) -> None:
    for start in range(0, count, 5000):
        answer = nsqd.post(f"/mpub?topic={TOPIC}&binary=true",
                           encode_mpub_body([body(i, size) for i in range(start, min(count, start + 5000))]))
        assert answer.status == 200, answer


def all_finished(nsqd: Nsqd, count: int) -> bool:
    channel = nsqd.channel(TOPIC, CHANNEL)
    return bool(channel) and channel["message_count"] >= count and channel["depth"] == 0 \
        and channel["in_flight_count"] == 0


def consume(spark: SparkSession, nsqd: Nsqd, count: int, size: int, batch: int, sink: Callable,
            workdir: Path) -> float:
    nsqd.post(f"/channel/create?topic={TOPIC}&channel={CHANNEL}")
    fill(nsqd, count, size)
    stream = (spark.readStream.format("nsq").option("nsqd_tcp_addresses", nsqd.tcp_address)
              .option("topic", TOPIC).option("channel", CHANNEL)
              .option("max_in_flight", str(min(count, 2 * batch)))
              .option("max_messages_per_batch", str(batch)).load())
    started = time.monotonic()
    query = sink(stream.writeStream, workdir).start()
    try:
        def done() -> bool:
            error = query.exception()
            if error is not None:
                raise RuntimeError(f"the query failed: {error}")
            return all_finished(nsqd, count)
        wait_for(done, timeout=3600, interval=0.1, message="every message FINed")
        return time.monotonic() - started
    finally:
        if SHOW_PROGRESS:
            for p in query.recentProgress:
                print(f"  batch {p['batchId']}: {p['numInputRows']} rows, {p['durationMs']}", file=sys.stderr)
        query.stop()


def noop(writer, workdir: Path):  # type: ignore[no-untyped-def]
    return writer.format("noop").option("checkpointLocation", str(workdir / "checkpoint-noop"))


def parquet(writer, workdir: Path):  # type: ignore[no-untyped-def]
    return (writer.format("parquet").option("path", str(workdir / "parquet"))
            .option("checkpointLocation", str(workdir / "checkpoint-parquet")))


def publish(spark: SparkSession, nsqd: Nsqd, count: int, size: int) -> float:
    rows = spark.range(count).selectExpr(f"rpad(format_string('%012d', id), {size}, 'x') AS body")
    started = time.monotonic()
    (rows.write.format("nsq").mode("append").option("nsqd_tcp_addresses", nsqd.tcp_address)
     .option("topic", TOPIC).save())
    seconds = time.monotonic() - started
    assert nsqd.topic(TOPIC)["message_count"] == count
    return seconds


def run(name: str, spark: SparkSession, count: int, size: int, batch: int) -> float:
    with tempfile.TemporaryDirectory(prefix="nsq-spark-bench-") as tmp:
        workdir = Path(tmp)
        nsqd = Nsqd(workdir / "nsqd", {"max-rdy-count": max(2500, count), "mem-queue-size": count + 1,
                                      "msg-timeout": "5m"}).start()
        try:
            if name == "nsq_to_noop":
                return consume(spark, nsqd, count, size, batch, noop, workdir)
            if name == "nsq_to_parquet":
                return consume(spark, nsqd, count, size, batch, parquet, workdir)
            return publish(spark, nsqd, count, size)
        finally:
            nsqd.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--size", type=int, default=200, help="body bytes")
    parser.add_argument("--batch", type=int, default=100_000, help="max messages per micro-batch")
    parser.add_argument("--only", default=",".join(WORKLOADS))
    parser.add_argument("--progress", action="store_true", help="print each micro-batch's timings")
    args = parser.parse_args()
    global SHOW_PROGRESS
    SHOW_PROGRESS = args.progress
    spark = (SparkSession.builder.master("local[2]").appName("nsq-spark-bench")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    try:
        for name in ("nsq_to_noop", "spark_to_nsq"):  # warm-up: Spark's first use of each path
            run(name, spark, 2000, args.size, 1000)
        print(f"{'workload':<16} {'messages':>10} {'seconds':>8} {'msgs/s':>10} {'MiB/s':>7}")
        for name in args.only.split(","):
            if name not in WORKLOADS:
                raise SystemExit(f"unknown workload {name!r} (known: {', '.join(WORKLOADS)})")
            seconds = run(name, spark, args.messages, args.size, args.batch)
            rate = args.messages / seconds
            print(f"{name:<16} {args.messages:>10} {seconds:>8.2f} {rate:>10.0f} "
                  f"{rate * args.size / 2**20:>7.1f}", flush=True)
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
