"""pynsq (tornado) over TLS with an auth secret: publish ``--count`` bodies with
``nsq.Writer``, read them back with ``nsq.Reader``, print one JSON line with what was
acknowledged and received. Run in its own interpreter (tornado owns the process)."""
from __future__ import annotations

import argparse
import json
import ssl
import sys

import nsq
import tornado.ioloop


def main() -> int:
    parser = argparse.ArgumentParser()
    for flag in ("--nsqd", "--topic", "--secret", "--ca", "--cert", "--key"):
        parser.add_argument(flag, required=True)
    parser.add_argument("--count", type=int, default=5)
    parser.add_argument("--deadline", type=float, default=20.0)
    args = parser.parse_args()
    tls = {"ca_certs": args.ca, "cert_reqs": ssl.CERT_REQUIRED, "certfile": args.cert, "keyfile": args.key}
    secure = {"tls_v1": True, "tls_options": tls, "auth_secret": args.secret}
    loop = tornado.ioloop.IOLoop.current()
    result: dict[str, object] = {"acked": 0, "errors": [], "received": []}
    bodies = [f"pynsq-{i}" for i in range(args.count)]

    def finish() -> None:
        print(json.dumps(result), flush=True)
        loop.stop()

    def on_message(message: nsq.Message) -> bool:
        result["received"].append(message.body.decode())  # type: ignore[union-attr]
        if len(result["received"]) == args.count:  # type: ignore[arg-type]
            loop.add_callback(finish)
        return True

    def start_reader() -> None:
        nsq.Reader(topic=args.topic, channel="ch", message_handler=on_message,
                   nsqd_tcp_addresses=[args.nsqd], max_in_flight=args.count, **secure)

    def on_ack(conn: object, data: object) -> None:
        if isinstance(data, nsq.Error):
            result["errors"].append(str(data))  # type: ignore[union-attr]
            loop.add_callback(finish)
            return
        result["acked"] = int(result["acked"]) + 1  # type: ignore[call-overload]
        if result["acked"] == args.count:
            start_reader()

    writer = nsq.Writer([args.nsqd], **secure)

    def publish_when_connected() -> None:
        if not any(c.connected() for c in writer.conns.values()):
            loop.call_later(0.05, publish_when_connected)
            return
        for body in bodies:
            writer.pub(args.topic, body.encode(), callback=on_ack)

    loop.add_callback(publish_when_connected)
    loop.call_later(args.deadline, finish)
    loop.start()
    return 0


if __name__ == "__main__":
    sys.exit(main())
