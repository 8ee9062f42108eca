"""Publishing into a test nsqd and driving the stream reader the way Spark's driver does,
without a JVM."""
from __future__ import annotations

from typing import Any, Callable, Iterator

import pyarrow as pa
import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit

from nsq_protocol.commands import encode_mpub_body
from nsq_spark.options import SourceOptions, parse_options
from nsq_spark.reader import NsqStreamReader
from tests.servers import Nsqd, wait_for


def publish(nsqd: Nsqd, topic: str, bodies: list[bytes], chunk: int = 5000) -> None:
    for i in range(0, len(bodies), chunk):
        answer = nsqd.post(f"/mpub?topic={topic}&binary=true", encode_mpub_body(bodies[i:i + chunk]))
        assert answer.status == 200, answer


def bodies(n: int, prefix: str = "m") -> list[bytes]:
    return [f"{prefix}-{i:06d}".encode() for i in range(n)]


def rows_between(reader: NsqStreamReader, start: dict, end: dict) -> list[dict[str, Any]]:
    """What the executors would read for the batch ``(start, end]``."""
    rows: list[dict[str, Any]] = []
    for partition in reader.partitions(start, end):
        for batch in reader.read(partition):
            assert isinstance(batch, pa.RecordBatch)
            rows += batch.to_pylist()
    return rows


def next_offset(reader: NsqStreamReader, start: dict, limit: ReadLimit | None = None,
                until: Callable[[dict], bool] | None = None, timeout: float = 10.0) -> dict:
    """``latestOffset`` polled as Spark polls it, until ``until`` holds (default: it moved)."""
    accept = until or (lambda end: end != start)
    return wait_for(lambda: (lambda end: end if accept(end) else None)(
        reader.latestOffset(start, limit or ReadAllAvailable())), timeout, message="latestOffset")


def channel_counts(nsqd: Nsqd, topic: str, channel: str) -> dict[str, int]:
    """The channel's counters, plus ``finish_count`` summed over its connected clients."""
    stats = nsqd.channel(topic, channel) or {}
    counts = {key: int(stats.get(key, 0)) for key in
              ("depth", "in_flight_count", "requeue_count", "timeout_count", "message_count")}
    counts["finish_count"] = sum(int(c["finish_count"]) for c in stats.get("clients") or [])
    return counts


@pytest.fixture
def open_reader() -> Iterator[Callable[..., NsqStreamReader]]:
    """``open_reader(topic=..., channel=..., nsqd_tcp_addresses=...)``: a reader built
    from Spark-style string options; every one is stopped at teardown."""
    readers: list[NsqStreamReader] = []

    def make(**options: object) -> NsqStreamReader:
        raw = {key: str(value) for key, value in options.items()}
        reader = NsqStreamReader(parse_options(SourceOptions, raw))
        readers.append(reader)
        return reader
    yield make
    for reader in readers:
        reader.stop()
