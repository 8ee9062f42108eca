"""A consumer process for the signal test: ``python -m tests.client.signal_consumer ADDRESS
TOPIC``. Prints ``ready`` once it holds messages, stops gracefully on SIGTERM/SIGINT and
prints the signal and its counters as JSON before exiting 0."""
from __future__ import annotations

import asyncio
import json
import sys

from nsq_client import Config, Consumer, Message, run_until_signalled


async def main(address: str, topic: str) -> None:
    ready = False

    async def slow_handler(message: Message) -> None:
        nonlocal ready
        if not ready:
            ready = True
            print("ready", flush=True)
        await asyncio.sleep(0.05)

    consumer = Consumer(topic, "ch", Config(max_in_flight=20), handler=slow_handler, concurrency=5)
    await consumer.connect_to_nsqd(address)
    received = await run_until_signalled(consumer)
    stats = consumer.stats()
    print(json.dumps({"signal": received.name, "received": stats.messages_received,
                      "finished": stats.messages_finished, "requeued": stats.messages_requeued,
                      "connections": stats.connections}), flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
