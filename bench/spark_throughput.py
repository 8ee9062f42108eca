"""NSQ <-> Spark throughput: prints figures, asserts nothing.

    .venv/bin/python bench/spark_throughput.py                       # local[2], 3 runs
    .venv/bin/python bench/spark_throughput.py --runs 5 --messages 400000
    .venv/bin/python bench/spark_throughput.py --only nsq_to_noop,spark_to_nsq --progress
    .venv/bin/python bench/spark_throughput.py --scaling            # partitions 1/2/4, two copies
    .venv/bin/python bench/spark_throughput.py --batch 100000,200000   # a row per batch size

Workloads, each against a fresh nsqd (``--max-rdy-count`` and ``--mem-queue-size`` raised
to the message count, as a pipeline's broker should be):

- ``nsq_to_noop``: messages queued in nsqd, then ``readStream.format("nsq")`` into Spark's
  no-op sink, timed from the query's start until nsqd saw every message FINed (which
  happens only after Spark committed the batch holding it).
- ``nsq_to_parquet``: the same into Parquet files, encoded as the archive job encodes them
  (``nsq_spark.archive.PARQUET_OPTIONS``).
- ``spark_to_nsq``: ``spark.range(n)`` as string bodies, ``write.format("nsq")``.
- with ``--scaling``: ``nsq_to_parquet`` with 1, 2 and 4 partitions per micro-batch, and
  ``2_copies_parquet``: two queries (each its own reader and checkpoint, as two copies of
  the archive job) on one channel.
- with ``--batch 100000,200000``: each read once more per further batch size
  (``nsq_to_parquet@200k``), ``max_in_flight`` twice the batch as always.

The session has the archive job's settings (``nsq_spark.archive.SESSION_CONF``: how the
checkpoint's logs are written); the write runs in the same session.

Each run of a workload gives: start-up (from the start until nsqd saw the first message
FINed, or for the write the first one published), the steady rate after that, the
overall rate, and with ``--usage`` the CPU seconds each kind of process spent per 100k
messages and the largest resident memory of one process of each kind. A row is the
median of ``--runs`` runs; the runs of all workloads interleave, so read and write share
the machine's load. First a small pass over every path (Spark's first use of each), then
``--warmup-runs`` rounds of every row at full size whose figures are dropped (each is
printed to stderr): the driver JVM's JIT compiler works through Spark's per-batch code
for several rounds, which a job that runs for hours pays once.
Spark is bound to 127.0.0.1. A read query is stopped after a drain (the reader FINed
everything and Spark runs no batch), so stopping it aborts nothing.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
from collections import defaultdict
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

from pyspark.sql import SparkSession  # noqa: E402
from pyspark.sql.streaming import StreamingQuery  # noqa: E402

from bench.proc_usage import ProcessMeter  # noqa: E402
from nsq_protocol.commands import encode_mpub_body  # noqa: E402
from nsq_spark import DrainSignal, register  # noqa: E402
from nsq_spark.archive import PARQUET_OPTIONS  # noqa: E402
from nsq_spark.archive import SESSION_CONF as ARCHIVE_SESSION_CONF  # noqa: E402
from tests.pipeline.standalone import StandaloneCluster  # noqa: E402
from tests.servers import Nsqd, wait_for  # noqa: E402

TOPIC, CHANNEL = "bench", "spark"
READS = ("nsq_to_noop", "nsq_to_parquet")
WORKLOADS = (*READS, "spark_to_nsq")
SCALING_PARTITIONS = (1, 2, 4)


@dataclass
class Run:
    messages: int
    seconds: float
    startup: float                  # until the first message was FINed (or published)
    steady: float                   # msgs/s after that
    steady_cpu: dict[str, float] = field(default_factory=dict)  # CPU s per 100k after that, by process
    cpu: dict[str, float] = field(default_factory=dict)
    peak_rss: dict[str, int] = field(default_factory=dict)

    @property
    def rate(self) -> float:
        return self.messages / self.seconds


@dataclass
class Setup:
    spark: SparkSession
    messages: int
    size: int
    batch: int
    partitions: int
    progress: bool
    parquet_options: dict[str, str] = field(default_factory=lambda: dict(PARQUET_OPTIONS))


def body(i: int, size: int) -> bytes:
    head = f"{i:012d}".encode()
    return head + b"x" * (size - len(head))


def create_channel(nsqd: Nsqd) -> None:
    """The reader's channel, before the messages arrive: they are queued on it, as on a
    pipeline's channel that already exists (nsqd creates no topic for /channel/create)."""
    for path in (f"/topic/create?topic={TOPIC}", f"/channel/create?topic={TOPIC}&channel={CHANNEL}"):
        answer = nsqd.post(path)
        assert answer.status == 200, (path, answer)


def fill(nsqd: Nsqd, count: int, size: int) -> None:
    for start in range(0, count, 5000):
        answer = nsqd.post(f"/mpub?topic={TOPIC}&binary=true",
                           encode_mpub_body([body(i, size) for i in range(start, min(count, start + 5000))]))
        assert answer.status == 200, answer


def finished(nsqd: Nsqd) -> int:
    """Messages of the channel nsqd saw FINed (none are requeued in these runs)."""
    channel = nsqd.channel(TOPIC, CHANNEL)
    if not channel:
        return 0
    return channel["message_count"] - channel["depth"] - channel["in_flight_count"] - channel["deferred_count"]


@dataclass
class Timing:
    total: float
    startup: float
    steady: float                                              # msgs/s
    steady_cpu: dict[str, float] = field(default_factory=dict)  # CPU s per 100k, by process, steady part


def timed(count: int, done_so_far: Callable[[], int], meter: ProcessMeter,
          check: Callable[[], None] = lambda: None) -> Timing:
    """Poll ``done_so_far`` until it reaches ``count``."""
    started = time.monotonic()
    first: tuple[float, int, dict[str, float]] | None = None
    while True:
        check()
        done, now = done_so_far(), time.monotonic()
        if done and first is None:
            first = (now, done, meter.cpu_now())
        if done >= count:
            break
        if now - started > 3600:
            raise TimeoutError(f"{done} of {count} after an hour")
        time.sleep(0.05)
    assert first is not None
    first_at, first_done, first_cpu = first
    if not (now > first_at and count > first_done):
        return Timing(now - started, first_at - started, float("nan"))
    last_cpu = meter.cpu_now()
    per_100k = 100_000 / (count - first_done)
    return Timing(now - started, first_at - started, (count - first_done) / (now - first_at),
                  {role: (cpu - first_cpu.get(role, 0.0)) * per_100k for role, cpu in last_cpu.items()})


def read_stream(setup: Setup, nsqd: Nsqd, drain: DrainSignal):  # type: ignore[no-untyped-def]
    return (setup.spark.readStream.format("nsq").option("nsqd_tcp_addresses", nsqd.tcp_address)
            .option("topic", TOPIC).option("channel", CHANNEL)
            .option("max_in_flight", str(min(setup.messages, 2 * setup.batch)))
            .option("max_messages_per_batch", str(setup.batch))
            .option("partitions", str(setup.partitions))
            .option("drain_file", str(drain.path)).load())


def sink(name: str, stream, workdir: Path, parquet_options: dict[str, str]):  # type: ignore[no-untyped-def]
    writer = stream.writeStream.option("checkpointLocation", str(workdir / "checkpoint"))
    if name == "nsq_to_noop":
        return writer.format("noop")
    return writer.format("parquet").options(**parquet_options).option("path", str(workdir / "parquet"))


def stop_drained(query: StreamingQuery, drain: DrainSignal) -> None:
    """Drain, so that no batch is running when the query stops (stopping one aborts it)."""
    try:
        if query.isActive and query.exception() is None:
            drain.request()
            wait_for(lambda: drain.is_drained() or not query.isActive, timeout=120, interval=0.05,
                     message="the reader drained")
    finally:
        query.stop()


def consume(setup: Setup, nsqd: Nsqd, workdir: Path, copies: int, sink_name: str) -> Run:
    create_channel(nsqd)
    fill(nsqd, setup.messages, setup.size)
    drains = [DrainSignal(workdir / f"drain-{i}") for i in range(copies)]
    queries: list[StreamingQuery] = []
    with ProcessMeter() as meter:
        try:
            for i, drain in enumerate(drains):
                queries.append(sink(sink_name, read_stream(setup, nsqd, drain), workdir / f"copy-{i}",
                                    setup.parquet_options).start())

            def check() -> None:
                for query in queries:
                    if query.exception() is not None:
                        raise RuntimeError(f"the query failed: {query.exception()}")
            timing = timed(setup.messages, lambda: finished(nsqd), meter, check)
        finally:
            for query, drain in zip(queries, drains):
                if setup.progress:
                    for p in query.recentProgress:
                        print(f"  batch {p['batchId']}: {p['numInputRows']} rows, {p['durationMs']}",
                              file=sys.stderr)
                stop_drained(query, drain)
    return Run(setup.messages, timing.total, timing.startup, timing.steady, timing.steady_cpu,
               meter.cpu_by_role(), meter.peak_rss_by_role())


def publish(setup: Setup, nsqd: Nsqd) -> Run:
    rows = setup.spark.range(setup.messages).selectExpr(
        f"rpad(format_string('%012d', id), {setup.size}, 'x') AS body")
    timing: list[Timing] = []
    failure: list[BaseException] = []

    def published() -> int:
        stats = nsqd.topic(TOPIC)
        return stats["message_count"] if stats else 0

    def watch(meter: ProcessMeter) -> None:  # Spark's write blocks the main thread (its session is that thread's)
        try:
            timing.append(timed(setup.messages, published, meter))
        except BaseException as err:
            failure.append(err)
    with ProcessMeter() as meter:
        watcher = threading.Thread(target=watch, args=(meter,), name="published", daemon=True)
        watcher.start()
        (rows.write.format("nsq").mode("append").option("nsqd_tcp_addresses", nsqd.tcp_address)
         .option("topic", TOPIC).save())
        watcher.join(60)
    if failure or not timing:
        raise RuntimeError(f"every message written, but not seen at nsqd: {failure}")
    t = timing[0]
    return Run(setup.messages, t.total, t.startup, t.steady, t.steady_cpu, meter.cpu_by_role(),
               meter.peak_rss_by_role())


def run(name: str, setup: Setup) -> Run:
    with tempfile.TemporaryDirectory(prefix="nsq-spark-bench-") as tmp:
        workdir = Path(tmp)
        nsqd = Nsqd(workdir / "nsqd", {"max-rdy-count": max(2500, setup.messages),
                                      "mem-queue-size": setup.messages + 1, "msg-timeout": "5m"}).start()
        try:
            if name == "spark_to_nsq":
                return publish(setup, nsqd)
            if name == "2_copies_parquet":
                return consume(setup, nsqd, workdir, 2, "nsq_to_parquet")
            return consume(setup, nsqd, workdir, 1, name)
        finally:
            nsqd.stop()


@dataclass(frozen=True)
class Row:
    name: str                       # as printed
    workload: str                   # one of WORKLOADS, or 2_copies_parquet
    partitions: int | None = None   # None: --partitions
    batch: int | None = None        # None: the first of --batch


def plan(only: list[str], scaling: bool, batches: list[int]) -> Iterator[Row]:
    """The rows of one round: each workload, each read once more per further batch size."""
    for name in only:
        yield Row(name, name)
        if name in READS:
            for batch in batches[1:]:
                yield Row(f"{name}@{batch // 1000}k", name, batch=batch)
    if scaling:
        for p in SCALING_PARTITIONS:
            yield Row(f"nsq_to_parquet@{p}", "nsq_to_parquet", partitions=p)
        yield Row("2_copies_parquet", "2_copies_parquet")


def spark_session(master: str, conf: list[str]) -> SparkSession:
    builder = (SparkSession.builder.master(master).appName("nsq-spark-bench")
               .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
               .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false"))
    for key, _, value in (c.partition("=") for c in conf):
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark


def report(rows: dict[str, list[Run]], write: str = "spark_to_nsq") -> None:
    def median(values: list[float]) -> float:
        return statistics.median(values)
    write_rate = median([r.rate for r in rows[write]]) if write in rows else None
    write_steady = median([r.steady for r in rows[write]]) if write in rows else None
    print(f"{'workload':<20} {'messages':>9} {'start-up s':>10} {'steady/s':>9} {'overall/s':>10} "
          f"{'MiB/s':>6} {'of write: overall':>17} {'steady':>7}")
    for name, runs in rows.items():
        rate, steady = median([r.rate for r in runs]), median([r.steady for r in runs])
        ratios = (f"{rate / write_rate:17.2f} {steady / write_steady:7.2f}"
                  if write_rate and write_steady and name != write else "")
        print(f"{name:<20} {runs[0].messages:>9} {median([r.startup for r in runs]):>10.1f} "
              f"{steady:>9.0f} {rate:>10.0f} {rate * SIZE / 2**20:>6.1f} {ratios}")
    if any(r.cpu for runs in rows.values() for r in runs):
        print("\nCPU seconds per 100k messages (median over runs), by process, the whole query:")
        cpu_table(rows, lambda r: {role: s * 100_000 / r.messages for role, s in r.cpu.items()})
        print("the steady part only (from the first message FINed, or published, to the last):")
        cpu_table(rows, lambda r: r.steady_cpu)
        print("\nlargest resident memory of one process (MiB, largest over runs), by process:")
        for name, runs in rows.items():
            peak: dict[str, int] = defaultdict(int)
            for r in runs:
                for role, size in r.peak_rss.items():
                    peak[role] = max(peak[role], size)
            print(f"  {name:<20} " + ", ".join(f"{role} {size / 2**20:.0f}" for role, size in
                                               sorted(peak.items(), key=lambda item: -item[1]) if size))


def cpu_table(rows: dict[str, list[Run]], per_100k: Callable[[Run], dict[str, float]]) -> None:
    for name, runs in rows.items():
        roles: dict[str, list[float]] = defaultdict(list)
        for r in runs:
            for role, seconds in per_100k(r).items():
                roles[role].append(seconds)
        parts = ", ".join(f"{role} {statistics.median(v):.2f}" for role, v in
                          sorted(roles.items(), key=lambda item: -statistics.median(item[1]))
                          if statistics.median(v) >= 0.01)
        total = statistics.median([sum(per_100k(r).values()) for r in runs])
        print(f"  {name:<20} total {total:.2f}: {parts}")


SIZE = 200


@contextmanager
def session_for(mode: str, conf: list[str], workdir: Path) -> Iterator[SparkSession]:
    """local[2], or a standalone master and worker (2 cores) started for the run."""
    if mode == "local":
        spark = spark_session("local[2]", conf)
        try:
            yield spark
        finally:
            spark.stop()
        return
    cluster = StandaloneCluster(workdir / "standalone", daemon_java_options="-XX:+UseSerialGC").start()
    try:
        spark = spark_session(cluster.url, ["spark.executor.cores=2", "spark.cores.max=2",
                                            f"spark.pyspark.python={sys.executable}", *conf])
        try:
            yield spark
        finally:
            spark.stop()
    finally:
        cluster.stop()


def measure(mode: str, args: argparse.Namespace, only: list[str]) -> dict[str, list[Run]]:
    rows: dict[str, list[Run]] = defaultdict(list)
    with tempfile.TemporaryDirectory(prefix="nsq-spark-bench-") as tmp, \
            session_for(mode, args.conf, Path(tmp)) as spark:
        warm = Setup(spark, args.warmup, args.size, max(1000, args.warmup // 2), args.partitions, False)
        for name in WORKLOADS:  # Spark's first use of each path
            run(name, warm)
        # Rounds at full size whose figures are dropped: the JIT compiles Spark's per-batch
        # code for several rounds (its compiler threads took 0.3-0.46 CPU s per 100k messages
        # of the steady part in the first three runs of a session, 0.06-0.07 in the seventh
        # and eighth), which a long-running job pays once.
        for i in range(-args.warmup_runs, args.runs):
            for row in plan(only, args.scaling, args.batch):
                batch = row.batch or args.batch[0]
                setup = Setup(spark, args.messages, args.size, batch, row.partitions or args.partitions,
                              args.progress, {} if args.parquet_defaults else dict(PARQUET_OPTIONS))
                result = run(row.workload, setup)
                if not args.usage:
                    result.cpu, result.steady_cpu, result.peak_rss = {}, {}, {}
                label = f"warm-up {i + args.warmup_runs + 1}" if i < 0 else f"run {i + 1}"
                print(f"  {mode} {label} {row.name}: {result.rate:.0f} msgs/s, steady {result.steady:.0f}, "
                      f"start-up {result.startup:.1f} s, load {os.getloadavg()[0]:.1f}", file=sys.stderr, flush=True)
                if i >= 0:
                    rows[row.name].append(result)
    return rows


def _sizes(text: str) -> list[int]:
    return [int(size) for size in text.split(",") if size]


def main() -> None:
    global SIZE
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mode", default="local", help="local, standalone or local,standalone")
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--size", type=int, default=200, help="body bytes")
    parser.add_argument("--batch", type=_sizes, default=[100_000],
                        help="max messages per micro-batch (max_in_flight is twice that); a list "
                             "(100000,200000) adds a row of each read per further size")
    parser.add_argument("--partitions", type=int, default=2, help="partitions per micro-batch")
    parser.add_argument("--runs", type=int, default=3, help="runs of each workload (a row is their median)")
    parser.add_argument("--warmup", type=int, default=20_000, help="messages of the first use of each path")
    parser.add_argument("--warmup-runs", type=int, default=5,
                        help="rounds of every row at full size before the measured runs (not reported)")
    parser.add_argument("--only", default=",".join(WORKLOADS))
    parser.add_argument("--scaling", action="store_true",
                        help="add nsq_to_parquet with 1/2/4 partitions and two copies on one channel")
    parser.add_argument("--usage", action="store_true",
                        help="CPU seconds and largest resident memory per kind of process")
    parser.add_argument("--progress", action="store_true", help="print each micro-batch's timings")
    parser.add_argument("--parquet-defaults", action="store_true",
                        help="write Parquet with Spark's default settings, not the archive job's")
    parser.add_argument("--checkpoint-defaults", action="store_true",
                        help="Spark's default checkpoint file manager, not the archive job's (SESSION_CONF)")
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="Spark configuration")
    args = parser.parse_args()
    SIZE = args.size
    if not args.checkpoint_defaults:
        args.conf[:0] = [f"{key}={value}" for key, value in ARCHIVE_SESSION_CONF.items()]
    only = [name for name in args.only.split(",") if name]
    for name in only:
        if name not in WORKLOADS:
            raise SystemExit(f"unknown workload {name!r} (known: {', '.join(WORKLOADS)})")
    modes = [m for m in args.mode.split(",") if m]
    for mode in modes:
        if mode not in ("local", "standalone"):
            raise SystemExit(f"unknown mode {mode!r} (local, standalone)")
    for mode in modes:
        rows = measure(mode, args, only)
        where = "local[2]" if mode == "local" else "standalone master + worker (2 cores), driver apart"
        print(f"\n{where}: {args.messages} messages of {args.size} bytes, batches of {args.batch[0]}, "
              f"{args.partitions} partitions, median of {args.runs} runs after {args.warmup_runs} "
              f"warm-up rounds, load average {os.getloadavg()[0]:.1f}")
        report(rows)
        sys.stdout.flush()


if __name__ == "__main__":
    main()
