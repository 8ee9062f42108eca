"""Publish numbered bodies with pynsq's ``nsq.Writer`` (tornado) and report each ack.

Output lines: ``{"acked": id}`` per acknowledged message, ``{"error": ..., "ids": [...]}``
per refused publish, and a final ``{"done": true, "acked_count": n, "failed_count": n}``.
Exit status 0 only when every message was acknowledged.
"""
from __future__ import annotations

import argparse
import functools
import logging
import sys

import nsq
import tornado.ioloop

from bodies import make_body, message_id
from jsonl import emit
from tornado_run import run_until_stopped


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


class Publisher:
    def __init__(self, args: argparse.Namespace, loop: tornado.ioloop.IOLoop) -> None:
        self.args = args
        self.loop = loop
        self.writer = nsq.Writer([args.nsqd])
        self.next_index = 0
        self.outstanding = 0
        self.acked = 0
        self.failed = 0

    def start_when_connected(self) -> None:
        if any(conn.connected() for conn in self.writer.conns.values()):
            self.pump()
        else:
            self.loop.call_later(0.02, self.start_when_connected)

    def pump(self) -> None:
        batch = max(1, self.args.mpub_batch)
        while self.outstanding < self.args.window and self.next_index < self.args.count and not self.failed:
            end = min(self.next_index + batch, self.args.count)
            ids = [message_id(self.args.prefix, i) for i in range(self.next_index, end)]
            self.next_index = end
            self.outstanding += 1
            callback = functools.partial(self.on_response, ids)
            bodies = [make_body(i) for i in ids]
            if self.args.mpub_batch:
                self.writer.mpub(self.args.topic, bodies, callback=callback)
            else:
                self.writer.pub(self.args.topic, bodies[0], callback=callback)

    def on_response(self, ids: list[str], conn: object, data: object) -> None:
        self.outstanding -= 1
        if isinstance(data, nsq.Error):
            self.failed += len(ids)
            emit(error=str(data), ids=ids)
        else:
            self.acked += len(ids)
            for ident in ids:
                emit(acked=ident)
        if self.failed or (self.next_index >= self.args.count and not self.outstanding):
            self.loop.stop()
        else:
            self.pump()


def main() -> int:
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    args = parse_args()
    loop = tornado.ioloop.IOLoop.current()
    publisher = Publisher(args, loop)
    loop.add_callback(publisher.start_when_connected)
    run_until_stopped(loop, args.deadline)
    emit(done=True, acked_count=publisher.acked, failed_count=publisher.failed)
    return 0 if publisher.acked == args.count else 1


if __name__ == "__main__":
    sys.exit(main())
