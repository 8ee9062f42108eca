"""Publish numbered bodies with gnsq's ``Producer`` (gevent) and report each ack.

Output lines: ``{"acked": id}`` per acknowledged message, ``{"error": ..., "ids": [...]}``
per refused publish, and a final ``{"done": true, "acked_count": n, "failed_count": n}``.
Exit status 0 only when every message was acknowledged.
"""
from __future__ import annotations

import argparse
import logging
import sys
from collections import deque

import gevent
import gnsq
from gevent.event import AsyncResult

from bodies import make_body, message_id
from jsonl import emit


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nsqd", required=True, help="host:port of nsqd's TCP listener")
    parser.add_argument("--topic", required=True)
    parser.add_argument("--prefix", required=True)
    parser.add_argument("--count", type=int, required=True)
    parser.add_argument("--mpub-batch", type=int, default=0, help="0 publishes with PUB, n>0 with MPUB of n")
    parser.add_argument("--window", type=int, default=50, help="commands awaiting a response at once")
    parser.add_argument("--deadline", type=float, default=60.0)
    return parser.parse_args()


def publish_all(producer: gnsq.Producer, args: argparse.Namespace) -> tuple[int, int]:
    pending: deque[tuple[list[str], AsyncResult]] = deque()
    acked = failed = 0

    def settle_oldest() -> None:
        nonlocal acked, failed
        ids, result = pending.popleft()
        try:
            result.get(timeout=args.deadline)
        except Exception as error:  # gnsq raises its NSQ* errors or gevent's Timeout
            failed += len(ids)
            emit(error=repr(error), ids=ids)
            return
        acked += len(ids)
        for ident in ids:
            emit(acked=ident)

    batch = max(1, args.mpub_batch)
    for start in range(0, args.count, batch):
        ids = [message_id(args.prefix, i) for i in range(start, min(start + batch, args.count))]
        bodies = [make_body(i) for i in ids]
        if args.mpub_batch:
            result = producer.multipublish(args.topic, bodies, timeout=args.deadline, raise_error=False)
        else:
            result = producer.publish(args.topic, bodies[0], timeout=args.deadline, raise_error=False)
        pending.append((ids, result))
        if len(pending) >= args.window:
            settle_oldest()
        if failed:
            break
    while pending:
        settle_oldest()
    return acked, failed


def main() -> int:
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    args = parse_args()
    producer = gnsq.Producer(nsqd_tcp_addresses=[args.nsqd])
    producer.start()
    with gevent.Timeout(args.deadline):
        acked, failed = publish_all(producer, args)
    producer.close()
    emit(done=True, acked_count=acked, failed_count=failed)
    return 0 if acked == args.count else 1


if __name__ == "__main__":
    sys.exit(main())
