"""gnsq (gevent) over TLS with an auth secret: publish ``--count`` bodies with
gnsq's TCP client, read them back with ``gnsq.Consumer``, print one JSON line with what
was acknowledged and received. Run in its own interpreter (gevent owns the process)."""
from __future__ import annotations

import argparse
import json
import ssl
import sys

import gevent
import gnsq


def main() -> int:
    parser = argparse.ArgumentParser()
    for flag in ("--nsqd", "--topic", "--secret", "--ca", "--cert", "--key"):
        parser.add_argument(flag, required=True)
    parser.add_argument("--count", type=int, default=5)
    parser.add_argument("--deadline", type=float, default=20.0)
    args = parser.parse_args()
    tls = {"ca_certs": args.ca, "cert_reqs": ssl.CERT_REQUIRED, "certfile": args.cert, "keyfile": args.key}
    secure = {"tls_v1": True, "tls_options": tls, "auth_secret": args.secret.encode()}
    result: dict[str, object] = {"acked": 0, "errors": [], "received": []}

    # gnsq's Producer mistakes the OK confirming an upgrade for a publish's answer and
    # crashes (its bug, against Go's nsqd too): publish on its plain TCP client instead
    host, _, port = args.nsqd.rpartition(":")
    conn = gnsq.NsqdTCPClient(host, int(port), **secure)
    try:
        conn.connect()
        conn.identify()
        for i in range(args.count):
            conn.publish(args.topic, f"gnsq-{i}".encode())
            frame, data = conn.read_response()
            while frame == gnsq.protocol.FRAME_TYPE_RESPONSE and data == gnsq.protocol.HEARTBEAT:
                frame, data = conn.read_response()
            if frame == gnsq.protocol.FRAME_TYPE_ERROR:
                result["errors"].append(repr(data))  # type: ignore[union-attr]
                break
            result["acked"] = i + 1
    except Exception as e:  # a refused AUTH is the answer this script reports
        result["errors"].append(repr(e))  # type: ignore[union-attr]
    finally:
        conn.close_stream()

    consumer = gnsq.Consumer(args.topic, "ch", [args.nsqd], max_in_flight=args.count, **secure)

    @consumer.on_message.connect
    def on_message(consumer: gnsq.Consumer, message: gnsq.Message) -> None:
        result["received"].append(message.body.decode())  # type: ignore[union-attr]
        message.finish()
        if len(result["received"]) == args.count:  # type: ignore[arg-type]
            gevent.spawn(consumer.close)

    @consumer.on_error.connect
    def on_error(consumer: gnsq.Consumer, error: Exception) -> None:
        result["errors"].append(repr(error))  # type: ignore[union-attr]

    if not result["errors"]:
        runner = gevent.spawn(consumer.start)
        runner.join(timeout=args.deadline)
        if not runner.ready():
            consumer.close()
            runner.join(timeout=5)
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
