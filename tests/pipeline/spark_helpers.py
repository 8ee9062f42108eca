"""Waiting on streaming queries and reading what they wrote."""
from __future__ import annotations

import asyncio
from typing import Callable, TypeVar

from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery

from nsq_client import Config, Consumer, Message
from nsq_spark import SCHEMA_DDL
from tests.servers import Nsqd, wait_for

T = TypeVar("T")

ARCHIVE_DDL = SCHEMA_DDL + ", date string, hour string"


def while_running(query: StreamingQuery, predicate: Callable[[], T], timeout: float,
                  message: str) -> T:
    """``wait_for`` that fails at once, with the query's error, if the query dies."""
    def check() -> T:
        error = query.exception()
        if error is not None:
            raise RuntimeError(f"the query failed: {error}")
        return predicate()
    return wait_for(check, timeout, interval=0.2, message=message)


def settled(nsqd: Nsqd, topic: str, channel: str, published: int) -> bool:
    """Every message published reached the channel and was FINed (none queued or in flight)."""
    stats = nsqd.channel(topic, channel)
    return bool(stats) and stats["message_count"] >= published and stats["depth"] == 0 \
        and stats["in_flight_count"] == 0 and stats["deferred_count"] == 0


def parquet_bodies(spark: SparkSession, path: str) -> list[bytes]:
    rows = spark.read.schema(ARCHIVE_DDL).parquet(path).select("body").collect()
    return [bytes(r.body) for r in rows]


def consume_bodies(nsqd: Nsqd, topic: str, channel: str, expected: int, timeout: float) -> list[bytes]:
    """Consume ``topic``/``channel`` with our client until ``expected`` messages came."""
    async def run() -> list[bytes]:
        received: list[bytes] = []
        done = asyncio.Event()

        async def handle(message: Message) -> None:
            received.append(message.body)
            if len(received) >= expected:
                done.set()
        consumer = Consumer(topic, channel, Config(max_in_flight=2000), handler=handle)
        await consumer.connect_to_nsqd(nsqd.tcp_address)
        try:
            async with asyncio.timeout(timeout):
                await done.wait()
        finally:
            await consumer.stop()
        return received
    return asyncio.run(run())
