"""``make demo``: NSQ on this machine, end to end, with a summary.

Starts an nsqd process, publishes messages to two topics over HTTP /mpub, consumes them
from two channels per topic over protocol V2, and checks that every channel received
every message ID exactly as published.
"""
from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

import aiohttp

from nsq_protocol import MAGIC_V2, commands
from nsq_protocol.frames import FRAME_MESSAGE, FrameDecoder
from nsq_protocol.message import decode_message

from .processes import Node


async def publish(http_address: str, topic: str, bodies: list[bytes], batch: int = 500) -> None:
    async with aiohttp.ClientSession() as http:
        for i in range(0, len(bodies), batch):
            data = commands.encode_mpub_body(bodies[i:i + batch])
            async with http.post(f"http://{http_address}/mpub?topic={topic}&binary=true", data=data) as r:
                if r.status != 200:
                    raise RuntimeError(f"/mpub answered {r.status}: {await r.text()}")


async def consume(tcp_address: str, topic: str, channel: str, expected: int,
                  timeout: float) -> list[bytes]:
    """Subscribe with RDY 500, FIN everything, return the bodies in arrival order."""
    host, port = tcp_address.rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(MAGIC_V2 + commands.sub(topic, channel) + commands.rdy(500))
    decoder, bodies = FrameDecoder(), []
    deadline = time.monotonic() + timeout
    try:
        while len(bodies) < expected:
            chunk = await asyncio.wait_for(reader.read(65536), max(0.01, deadline - time.monotonic()))
            if not chunk:
                raise RuntimeError("nsqd closed the connection")
            decoder.feed(chunk)
            fins = []
            for frame in decoder:
                if frame.type == FRAME_MESSAGE:
                    msg = decode_message(frame.data)
                    bodies.append(msg.body)
                    fins.append(commands.fin(msg.id))
                elif frame.data == b"_heartbeat_":
                    fins.append(commands.nop())
            writer.write(b"".join(fins))
    finally:
        writer.close()
    return bodies


async def run(messages: int, workdir: Path) -> bool:
    nsqd = Node("nsqd", "nsqd-0", workdir / "nsqd-0")
    print(f"starting nsqd on {nsqd.tcp_address} (HTTP {nsqd.http_address}), data in {workdir}")
    await nsqd.start()
    ok = True
    try:
        plan = {f"demo-{name}": ["archive", "alerts"] for name in ("orders", "clicks")}
        async with aiohttp.ClientSession() as http:
            for topic, channels in plan.items():
                for path in [f"/topic/create?topic={topic}"] + [
                        f"/channel/create?topic={topic}&channel={c}" for c in channels]:
                    async with http.post(f"http://{nsqd.http_address}{path}") as r:
                        if r.status != 200:
                            raise RuntimeError(f"{path} answered {r.status}")
        started = time.monotonic()
        sent = {topic: [b"%s-%06d" % (topic.encode(), i) for i in range(messages)] for topic in plan}
        await asyncio.gather(*(publish(nsqd.http_address, topic, bodies) for topic, bodies in sent.items()))
        published = time.monotonic() - started
        results = await asyncio.gather(*(consume(nsqd.tcp_address, t, c, messages, 60)
                                         for t, chans in plan.items() for c in chans))
        elapsed = time.monotonic() - started
        print(f"\n{'topic':<14}{'channel':<10}{'published':>10}{'delivered':>10}{'lost':>6}{'dupes':>6}")
        for (topic, channel), got in zip([(t, c) for t, cs in plan.items() for c in cs], results):
            lost = len(set(sent[topic]) - set(got))
            dupes = len(got) - len(set(got))
            ok &= lost == 0
            print(f"{topic:<14}{channel:<10}{len(sent[topic]):>10}{len(got):>10}{lost:>6}{dupes:>6}")
        total = messages * len(plan)
        print(f"\npublished {total} messages in {published:.2f}s; delivered to 4 channels in {elapsed:.2f}s")
    finally:
        code = await nsqd.stop()
        print(f"nsqd stopped (exit {code})")
    print("OK: nothing lost" if ok else "FAILED: messages lost")
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(prog="nsq-demo", description=__doc__)
    parser.add_argument("--messages", type=int, default=20000, help="messages per topic")
    parser.add_argument("--workdir", type=Path, default=None, help="where nodes keep data and logs")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="nsq-demo-") as tmp:
        ok = asyncio.run(run(args.messages, args.workdir or Path(tmp)))
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
