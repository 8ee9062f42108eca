"""``spark.readStream.format("nsq")``: the stream reader.

Spark keeps one reader on the driver for the whole query and calls ``initialOffset``,
``latestOffset``, ``partitions``, ``commit`` and ``stop`` on it; it copies the reader
once more only to ship ``read`` to the executors. So the NSQ connections (the
:class:`Feed` on its :class:`LoopThread`) are opened on the first offset request, never
in ``__init__``, and are never pickled. A batch's partitions name ranges of message
numbers, and each task fetches its rows from this reader (:mod:`batch_transfer`), or,
with ``batch_transfer=inline``, the partitions carry the rows themselves. The driver FINs
the messages when Spark commits the batch.
"""
from __future__ import annotations

import logging
import uuid
from typing import Any, Iterator, Sequence

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows

from .batch_transfer import BatchServer, RowsRequest, default_listen_host, fetch_rows
from .drain import DrainSignal
from .feed import Feed
from .loop_thread import LoopThread
from .offsets import Position, even_ranges, messages_between, seq_in_session
from .options import SourceOptions
from .schema import record_batch

log = logging.getLogger("nsq_spark")

FIRST_BATCH_WAIT = 1.0  # seconds the first offset request waits for the first deliveries


class NsqPartition(InputPartition):
    """Some messages of one batch, as one Arrow record batch (``batch_transfer=inline``)."""

    def __init__(self, batch: pa.RecordBatch) -> None:
        super().__init__(batch.num_rows)
        self.batch = batch


class NsqRowsPartition(InputPartition):
    """The messages ``(after, through]`` of a reader session, fetched from that reader."""

    def __init__(self, address: str, token: str, request: RowsRequest) -> None:
        super().__init__(request.through - request.after)
        self.address = address
        self.token = token
        self.request = request


class _RunningFeed:
    """A :class:`Feed` started on its own loop thread (its methods are called across), and
    the server the tasks fetch their rows from."""

    def __init__(self, options: SourceOptions, session: str) -> None:
        self.options = options
        self.session = session
        self.thread = LoopThread("nsq-spark-source")
        self.server: BatchServer | None = None
        try:
            self.feed = self.thread.call(Feed, options)
            self.thread.run(self.feed.start())
            if options.batch_transfer == "fetch":
                self.server = BatchServer(self._rows)
                host, port = options.batch_server_host_port()
                self.thread.run(self.server.start(host or default_listen_host(), port))
        except BaseException:
            self.close()
            raise

    def _rows(self, request: RowsRequest) -> pa.RecordBatch:
        """Runs on the loop thread, where the held messages live."""
        if request.session != self.session:
            raise LookupError(f"rows of reader session {request.session} are not held here")
        held = self.feed.take(request.after, request.through)
        return record_batch(held, self.options.topic, self.options.channel)

    def close(self) -> None:
        feed = getattr(self, "feed", None)
        try:
            if self.server is not None:
                self.thread.run(self.server.close(), timeout=10)
            if feed is not None:
                self.thread.run(feed.close(), timeout=30)
        finally:
            self.thread.stop()


class NsqStreamReader(DataSourceStreamReader):
    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self.session = uuid.uuid4().hex
        self._running: _RunningFeed | None = None
        self._first_batch_planned = False

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_running"] = None  # connections stay on the driver
        return state

    def _feed(self) -> _RunningFeed:
        if self._running is None:
            self._running = _RunningFeed(self.options, self.session)
        return self._running

    def _call(self, name: str, *args: Any) -> Any:
        running = self._feed()
        return running.thread.call(getattr(running.feed, name), *args)

    # -- offsets ----------------------------------------------------------------------
    def initialOffset(self) -> dict:
        self._feed()
        return Position(self.session).to_json()

    def getDefaultReadLimit(self) -> ReadLimit:
        limit = self.options.max_messages_per_batch
        return ReadMaxRows(limit) if limit else ReadAllAvailable()

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        begin = Position.from_json(start)
        after = seq_in_session(begin, self.session)
        drain = DrainSignal(self.options.drain_file) if self.options.drain_file else None
        if drain is not None and drain.is_requested():
            self._call("drain")
        max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        if not self._first_batch_planned:
            # Spark runs a query's first batch whatever it holds: let it hold what nsqd
            # delivers right after SUB instead of nothing
            self._first_batch_planned = True
            running = self._feed()
            running.thread.run(running.feed.first_deliveries(max_rows, FIRST_BATCH_WAIT))
        through, owes_commit = self._call("admit", after, max_rows)
        if begin.session != self.session:
            # the first batch after a restart: it replaces the earlier session's offset
            return Position(self.session, through).to_json()
        if through > after:
            return begin.advanced_to(through).to_json()
        if owes_commit:
            return begin.flushed().to_json()  # an empty batch, so that Spark commits the last one
        if drain is not None and self._call("drained"):
            drain.report_drained()
        return start

    def reportLatestOffset(self) -> dict | None:
        if self._running is None:
            return None
        return Position(self.session, self._call("received")).to_json()

    # -- batches ------------------------------------------------------------------------
    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        after, through = messages_between(Position.from_json(start), Position.from_json(end), self.session)
        if through == after:
            return []
        ranges = even_ranges(after, through, self.options.partitions)
        running = self._feed()
        if running.server is None:
            held = self._call("take", after, through)
            return [NsqPartition(record_batch(held.slice(a - after, b - after), self.options.topic,
                                              self.options.channel)) for a, b in ranges]
        self._call("check")
        return [NsqRowsPartition(running.server.address, running.server.token, RowsRequest(self.session, a, b))
                for a, b in ranges]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if isinstance(partition, NsqRowsPartition):
            yield from fetch_rows(partition.address, partition.token, partition.request)
        else:
            assert isinstance(partition, NsqPartition)
            yield partition.batch

    def commit(self, end: dict) -> None:
        position = Position.from_json(end)
        if position.session != self.session:
            self._call("check")  # an earlier run's batch: nsqd redelivers its messages anyway
            return
        finished = self._call("commit", position.seq)
        if finished:
            log.debug("committed through %d: %d messages finished", position.seq, finished)

    def stop(self) -> None:
        running, self._running = self._running, None
        if running is not None:
            running.close()
