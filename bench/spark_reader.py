"""The nsq source's driver-side reader alone, driven as Spark drives it, without a JVM:
the CPU seconds it spends per 100k messages. Prints figures, asserts nothing.

    .venv/bin/python bench/spark_reader.py                 # 200k messages, 3 runs
    .venv/bin/python bench/spark_reader.py --messages 300000 --batch 100000

Messages are queued in a fresh nsqd first; then the reader subscribes, and batches of
``--batch`` messages are planned, each fetched by ``--partitions`` tasks (Arrow IPC over
the reader's port, as executors fetch them) and committed (FINed). The figure is this
process's CPU time (the reader's loop thread, the planning calls and the fetching tasks),
split into receiving (until the batch's messages have arrived), planning plus fetching,
and committing.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pyspark.sql.streaming.datasource import ReadMaxRows  # noqa: E402

from bench.spark_throughput import CHANNEL, TOPIC, create_channel, fill, finished  # noqa: E402
from nsq_spark.options import SourceOptions  # noqa: E402
from nsq_spark.reader import NsqStreamReader  # noqa: E402
from tests.servers import Nsqd, wait_for  # noqa: E402


def cpu() -> float:
    times = os.times()
    return times.user + times.system


def one_run(messages: int, size: int, batch: int, partitions: int) -> dict[str, float]:
    spent = {"receive": 0.0, "plan and fetch": 0.0, "commit": 0.0}
    with tempfile.TemporaryDirectory(prefix="nsq-spark-reader-bench-") as tmp:
        nsqd = Nsqd(Path(tmp) / "nsqd", {"max-rdy-count": max(2500, messages),
                                       "mem-queue-size": messages + 1, "msg-timeout": "5m"}).start()
        try:
            create_channel(nsqd)
            fill(nsqd, messages, size)
            reader = NsqStreamReader(SourceOptions(
                topic=TOPIC, channel=CHANNEL, nsqd_tcp_addresses=(nsqd.tcp_address,),
                max_in_flight=min(messages, 2 * batch), partitions=partitions))
            try:
                start = reader.initialOffset()
                limit = ReadMaxRows(batch)
                read = 0
                while read < messages:
                    began = cpu()
                    want = min(batch, messages - read)
                    end = wait_for(lambda: (lambda e: e if e.get("seq", 0) - read >= want else None)(
                        reader.latestOffset(start, limit)), 120, interval=0.01, message="a full batch")
                    planned = cpu()
                    rows = sum(b.num_rows for p in reader.partitions(start, end) for b in reader.read(p))
                    fetched = cpu()
                    reader.commit(end)
                    committed = cpu()
                    spent["receive"] += planned - began
                    spent["plan and fetch"] += fetched - planned
                    spent["commit"] += committed - fetched
                    assert rows == want, (rows, want)
                    read += rows
                    start = end
                wait_for(lambda: finished(nsqd) >= messages, 60, message="every message FINed at nsqd")
            finally:
                reader.stop()
        finally:
            nsqd.stop()
    return {key: seconds * 100_000 / messages for key, seconds in spent.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--size", type=int, default=200, help="body bytes")
    parser.add_argument("--batch", type=int, default=100_000)
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    one_run(20_000, args.size, 10_000, args.partitions)  # warm-up
    runs = [one_run(args.messages, args.size, args.batch, args.partitions) for _ in range(args.runs)]
    total = statistics.median(sum(r.values()) for r in runs)
    parts = ", ".join(f"{key} {statistics.median(r[key] for r in runs):.3f}" for key in runs[0])
    print(f"reader CPU s per 100k messages ({args.messages} of {args.size} bytes, batches of {args.batch}, "
          f"median of {args.runs}, load average {os.getloadavg()[0]:.1f}): {total:.3f} ({parts})")


if __name__ == "__main__":
    main()
