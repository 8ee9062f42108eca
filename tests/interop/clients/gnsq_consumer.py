"""Consume with gnsq's ``Consumer`` (gevent), one Consumer per channel, until killed.

Output: ``{"channel", "id", "intact", "attempts", "msg_id", "t"}`` per delivery.
Modes: ``finish`` answers FIN; ``requeue-once`` answers REQ (no delay) on the first
attempt and FIN afterwards; ``timeout-once`` never answers the first attempt, so nsqd
must time it out and redeliver it, and answers FIN afterwards.
Warm-up messages (see ``bodies.is_warmup``) are always finished.
``--deflate`` / ``--snappy`` ask for a compressed connection in IDENTIFY.
"""
from __future__ import annotations

import argparse
import logging
import sys
import time
from typing import Callable

import gevent
import gnsq

from bodies import is_warmup, read_body
from jsonl import emit, text

MODES = ("finish", "requeue-once", "timeout-once")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--nsqd", help="host:port of nsqd's TCP listener")
    where.add_argument("--lookupd", help="host:port of nsqlookupd's HTTP listener, polled every second")
    parser.add_argument("--topic", required=True)
    parser.add_argument("--channel", action="append", required=True)
    parser.add_argument("--max-in-flight", type=int, default=100)
    parser.add_argument("--mode", choices=MODES, default="finish")
    parser.add_argument("--deflate", action="store_true")
    parser.add_argument("--snappy", action="store_true")
    parser.add_argument("--handle-seconds", type=float, default=0.0,
                        help="time the handler takes per message, so a test can act mid-stream")
    parser.add_argument("--deadline", type=float, default=60.0)
    return parser.parse_args()


def make_handler(channel: str, mode: str, unanswered: list[gnsq.Message],
                 handle_seconds: float) -> Callable[..., None]:
    def handle(consumer: gnsq.Consumer, message: gnsq.Message) -> None:
        ident, intact = read_body(message.body)
        emit(channel=channel, id=ident, intact=intact, attempts=message.attempts,
             msg_id=text(message.id), t=time.time())
        if handle_seconds:
            gevent.sleep(handle_seconds)
        first_attempt = message.attempts == 1 and not is_warmup(ident)
        if first_attempt and mode == "requeue-once":
            message.requeue(time_ms=0, backoff=False)
        elif first_attempt and mode == "timeout-once":
            message.enable_async()
            unanswered.append(message)
        # otherwise gnsq answers FIN when the handler returns
    return handle


def main() -> int:
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    args = parse_args()
    unanswered: list[gnsq.Message] = []  # kept alive so gnsq never answers them
    consumers = []
    for channel in args.channel:
        where = ({"lookupd_http_addresses": [f"http://{args.lookupd}"], "lookupd_poll_interval": 1}
                 if args.lookupd else {"nsqd_tcp_addresses": [args.nsqd]})
        consumer = gnsq.Consumer(args.topic, channel, **where,
                                 max_in_flight=args.max_in_flight, max_tries=0,
                                 deflate=args.deflate, snappy=args.snappy)
        consumer.on_message.connect(make_handler(channel, args.mode, unanswered, args.handle_seconds), weak=False)
        consumer.start(block=False)
        consumers.append(consumer)
    gevent.sleep(args.deadline)
    for consumer in consumers:
        consumer.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
