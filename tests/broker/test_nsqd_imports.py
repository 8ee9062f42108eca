"""What an nsqd process loads (issue 16: an idle nsqd's memory). A fresh interpreter
imports nsqd's CLI, starts an nsqd in it with a lookupd and an auth server configured,
serves HTTP (/ping, /pub, /stats) and a TCP client (IDENTIFY, PUB), and only then looks at
``sys.modules``: aiohttp, prometheus_client and snappy must not be there. Then the first
snappy IDENTIFY loads snappy and the first /metrics scrape prometheus_client, so the lazy
paths are proven to work, not just to be skipped."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

HEAVY = ("aiohttp", "yarl", "multidict", "prometheus_client", "snappy", "cramjam")

PROBE = r"""
import asyncio, json, struct, sys
from nsqd import cli
from nsq_protocol import MAGIC_V2
from nsq_protocol.commands import identify

HEAVY = %(heavy)r

async def http(port, request):
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(request)
    head = await reader.readuntil(b"\r\n\r\n")
    length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
    await reader.readexactly(length)
    writer.close()
    return int(head.split()[1])

async def tcp(port, features, then=b""):
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(MAGIC_V2 + identify({"feature_negotiation": True, **features}) + then)
    size, = struct.unpack(">l", await reader.readexactly(4))
    answer = await reader.readexactly(size)
    writer.close()
    return json.loads(answer[4:])

def loaded():
    return sorted(name for name in HEAVY if name in sys.modules)

async def main(options):
    from nsqd.nsqd import NSQD
    nsqd = NSQD(options)
    await nsqd.start()
    while not nsqd.loaded:
        await asyncio.sleep(0.01)
    statuses = [await http(nsqd.http_port, b"GET /ping HTTP/1.1\r\nHost: x\r\n\r\n"),
                await http(nsqd.http_port, b"POST /pub?topic=t HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi"),
                await http(nsqd.http_port, b"GET /stats?format=json HTTP/1.1\r\nHost: x\r\n\r\n")]
    plain = await tcp(nsqd.tcp_port, {})
    serving = loaded()
    snappy = await tcp(nsqd.tcp_port, {"snappy": True})
    after_snappy = loaded()
    statuses.append(await http(nsqd.http_port, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"))
    after_metrics = loaded()
    await nsqd.stop()
    print(json.dumps({"statuses": statuses, "plain_snappy": plain["snappy"], "snappy": snappy["snappy"],
                      "serving": serving, "after_metrics": after_metrics, "after_snappy": after_snappy}))

options = cli.load_options(sys.argv[1:])
cli.install_event_loop()
asyncio.run(main(options))
"""


def test_a_serving_nsqd_has_not_loaded_aiohttp_prometheus_client_or_snappy(tmp_path: Path) -> None:
    argv = [sys.executable, "-c", PROBE % {"heavy": HEAVY}, "--tcp-address=127.0.0.1:0",
            "--http-address=127.0.0.1:0", f"--data-path={tmp_path}", "--lookupd-tcp-address=127.0.0.1:1",
            "--auth-http-address=127.0.0.1:1", "--log-level=warn"]
    run = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr[-3000:]
    report = json.loads(run.stdout.strip().splitlines()[-1])
    assert report["statuses"] == [200, 200, 200, 200]
    assert report["serving"] == []
    assert (report["plain_snappy"], report["snappy"]) == (False, True)
    assert set(report["after_snappy"]) - {"cramjam"} == {"snappy"}  # python-snappy may sit on cramjam
    assert set(report["after_metrics"]) - set(report["after_snappy"]) == {"prometheus_client"}
