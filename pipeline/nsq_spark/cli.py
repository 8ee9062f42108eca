"""``nsq-spark``: pipeline jobs on Spark.

    nsq-spark archive --topic events --channel archive \\
        --lookupd-http-address 127.0.0.1:4161 \\
        --output /data/events --checkpoint /data/checkpoints/events --master 'local[2]'

``--master`` and ``--conf`` go to Spark, so the same command runs in local mode or on a
cluster (or leave ``--master`` out under ``spark-submit``). SIGTERM or SIGINT drains:
no more messages are taken, the batch in progress and the empty one that commits it
run, every message taken is FINed, then the query stops and the command exits 0.
"""
from __future__ import annotations

import argparse
import logging
import os
import shutil
import signal
import sys
import tempfile
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from nsq_protocol.flags import parse_duration
from nsq_protocol.version import own_program_version

from .drain import DrainSignal
from .options import OptionError

if TYPE_CHECKING:  # PySpark is imported by the job only: --version and -h run without it
    from .archive import ArchiveJob

log = logging.getLogger("nsq_spark")

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def _key_value(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key, value


def _seconds(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        try:
            return parse_duration(text)
        except ValueError as err:
            raise argparse.ArgumentTypeError(str(err)) from None


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="nsq-spark", description="NSQ pipelines on Spark")
    top.add_argument("--version", action="version", version=own_program_version("nsq-spark"))
    jobs = top.add_subparsers(dest="job", required=True)
    archive = jobs.add_parser("archive", help="write a topic/channel to Parquet partitioned by date/hour",
                              description="Consume a topic/channel into Parquet files partitioned by "
                                          "the UTC date and hour each message was published, at least "
                                          "once, with a checkpoint to restart from.")
    nsq = archive.add_argument_group("NSQ")
    nsq.add_argument("--topic", required=True)
    nsq.add_argument("--channel", required=True)
    nsq.add_argument("--nsqd-tcp-address", action="append", default=[], metavar="HOST:PORT",
                     help="nsqd to consume from (repeatable)")
    nsq.add_argument("--lookupd-http-address", action="append", default=[], metavar="HOST:PORT",
                     help="nsqlookupd to discover nsqds through (repeatable)")
    nsq.add_argument("--max-in-flight", type=int, help="messages held at once across nsqds (default 2500)")
    nsq.add_argument("--max-messages-per-batch", type=int, help="upper bound of a micro-batch")
    nsq.add_argument("--msg-timeout", help="message timeout asked of nsqd (e.g. 60s)")
    nsq.add_argument("--partitions", type=int, help="Spark partitions per micro-batch (default 2)")
    nsq.add_argument("--option", action="append", type=_key_value, default=[], metavar="KEY=VALUE",
                     help="any other option of the nsq source, e.g. tls_v1=true (repeatable)")
    out = archive.add_argument_group("output")
    out.add_argument("--output", required=True, help="directory (any Hadoop path) for the Parquet files")
    out.add_argument("--checkpoint", required=True, help="checkpoint directory of this copy of the job")
    out.add_argument("--trigger", help="processing-time trigger, e.g. '10 seconds' (default: continuous)")
    spark = archive.add_argument_group("Spark")
    spark.add_argument("--master", help="Spark master URL, e.g. local[2] or spark://host:7077 "
                                        "(default: Spark's, as spark-submit sets it)")
    spark.add_argument("--app-name", default="nsq-spark-archive")
    spark.add_argument("--conf", action="append", type=_key_value, default=[], metavar="KEY=VALUE",
                       help="Spark configuration (repeatable)")
    archive.add_argument("--drain-timeout", type=_seconds, default=120.0,
                         help="on SIGTERM, how long to wait for the drain before stopping anyway")
    return top


def archive_job(args: argparse.Namespace, drain_file: Path) -> "ArchiveJob":
    from .archive import ArchiveJob

    options: dict[str, str] = {"topic": args.topic, "channel": args.channel,
                               "drain_file": str(drain_file)}
    if args.nsqd_tcp_address:
        options["nsqd_tcp_addresses"] = ",".join(args.nsqd_tcp_address)
    if args.lookupd_http_address:
        options["lookupd_http_addresses"] = ",".join(args.lookupd_http_address)
    for name in ("max_in_flight", "max_messages_per_batch", "msg_timeout", "partitions"):
        if getattr(args, name) is not None:
            options[name] = str(getattr(args, name))
    options.update(dict(args.option))
    return ArchiveJob(options, args.output, args.checkpoint, args.trigger, query_name=None)


def run_archive(args: argparse.Namespace) -> int:
    drain_dir = Path(tempfile.mkdtemp(prefix="nsq-spark-"))
    drain = DrainSignal(drain_dir / "drain")
    job = archive_job(args, drain.path)
    try:
        job.check()
    except OptionError as err:
        print(f"nsq-spark archive: {err}", file=sys.stderr)
        return EXIT_USAGE

    stop_requested = threading.Event()
    previous = {sig: signal.signal(sig, lambda *_: stop_requested.set())
                for sig in (signal.SIGTERM, signal.SIGINT)}

    from pyspark.sql import SparkSession  # Spark starts only once the arguments are sound

    from .archive import SESSION_CONF, start_archive

    # local workers must run this interpreter, which has the connector installed
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    already_running = SparkSession.getActiveSession() is not None
    builder = SparkSession.builder.appName(args.app_name)
    if args.master:
        builder = builder.master(args.master)
    for key, value in [*SESSION_CONF.items(), *args.conf]:
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    try:
        query = start_archive(spark, job)
        log.info("archiving %s/%s into %s", args.topic, args.channel, args.output)
        while query.isActive and not stop_requested.is_set():
            query.awaitTermination(1)
        if stop_requested.is_set() and query.isActive:
            drain.request()
            if not drain.wait_drained(args.drain_timeout):
                log.warning("not drained after %ss: stopping anyway (the last batch will be "
                            "delivered again)", args.drain_timeout)
            query.stop()
        error = query.exception()
        if error is not None:
            print(f"nsq-spark archive: the query failed: {error}", file=sys.stderr)
            return EXIT_FAILED
        return EXIT_OK
    finally:
        if not already_running:  # a session the caller made is the caller's to stop
            spark.stop()
        shutil.rmtree(drain_dir, ignore_errors=True)
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    args = parser().parse_args(argv)
    if args.job == "archive":
        return run_archive(args)
    return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
