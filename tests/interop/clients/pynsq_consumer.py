"""Consume with pynsq's ``nsq.Reader`` (tornado), one Reader per channel, until killed.

Output: ``{"channel", "id", "intact", "attempts", "msg_id", "t"}`` per delivery.
Modes: ``finish`` answers FIN; ``requeue-once`` answers REQ (no delay) on the first
attempt and FIN afterwards; ``timeout-once`` never answers the first attempt, so nsqd
must time it out and redeliver it, and answers FIN afterwards.
Warm-up messages (see ``bodies.is_warmup``) are always finished.
"""
from __future__ import annotations

import argparse
import functools
import logging
import sys
import time

import nsq
import tornado.ioloop

from bodies import is_warmup, read_body
from jsonl import emit, text
from tornado_run import run_until_stopped

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
    parser.add_argument("--handle-seconds", type=float, default=0.0,
                        help="time the handler takes per message, so a test can act mid-stream")
    parser.add_argument("--deadline", type=float, default=60.0)
    return parser.parse_args()


def main() -> int:
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    args = parse_args()
    unanswered: list[nsq.Message] = []  # kept alive so pynsq never answers them

    def handle(channel: str, message: nsq.Message) -> bool | None:
        ident, intact = read_body(message.body)
        emit(channel=channel, id=ident, intact=intact, attempts=message.attempts,
             msg_id=text(message.id), t=time.time())
        if args.handle_seconds:
            time.sleep(args.handle_seconds)  # blocks tornado's loop: this Reader is a slow consumer
        first_attempt = message.attempts == 1 and not is_warmup(ident)
        if first_attempt and args.mode == "requeue-once":
            message.requeue(delay=0, backoff=False)
            return None
        if first_attempt and args.mode == "timeout-once":
            message.enable_async()
            unanswered.append(message)
            return None
        return True

    where = ({"lookupd_http_addresses": [f"http://{args.lookupd}"], "lookupd_poll_interval": 1}
             if args.lookupd else {"nsqd_tcp_addresses": [args.nsqd]})
    readers = [nsq.Reader(topic=args.topic, channel=channel, **where,
                          message_handler=functools.partial(handle, channel),
                          max_in_flight=args.max_in_flight, max_tries=0)
               for channel in args.channel]
    run_until_stopped(tornado.ioloop.IOLoop.current(), args.deadline)
    for reader in readers:
        reader.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
