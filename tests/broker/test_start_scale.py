"""nsqd's start with many topics: the data path is listed once (not once per queue), the
listeners answer while the topics load, and readiness follows the load."""
from __future__ import annotations

import asyncio
import json
import os
import struct
from pathlib import Path
from typing import Any, Iterator

import aiohttp
import pytest

import nsqd.nsqd as nsqd_module
from nsq_protocol import MAGIC_V2, commands
from nsq_protocol.message import encode_message
from nsqd.nsqd import NSQD
from nsqd.options import NsqdOptions

TOPICS = 300


def write_data_path(path: Path, topics: int) -> bytes:
    """What a clean stop leaves for ``topics`` topics of channels c0 and c1, with one
    message on disk in the last topic's queue; returns that message's payload."""
    doc = {"topics": [{"name": f"t{t}", "paused": False,
                       "channels": [{"name": "c0", "paused": False}, {"name": "c1", "paused": False}]}
                      for t in range(topics)], "version": "1.3.0"}
    (path / "nsqd.dat").write_text(json.dumps(doc))
    for t in range(topics):
        for queue in (f"t{t}", f"t{t}:c0", f"t{t}:c1"):
            (path / f"{queue}.diskqueue.meta.dat").write_text("0\n0,0\n0,0\n")
    payload = encode_message(b"0123456789abcdef", 1_700_000_000_000_000_000, 0, b"from disk")
    entry = struct.pack(">i", len(payload)) + payload
    last = f"t{topics - 1}"
    (path / f"{last}.diskqueue.000000.dat").write_bytes(entry)
    (path / f"{last}.diskqueue.meta.dat").write_text(f"1\n0,0\n0,{len(entry)}\n")
    return payload


@pytest.fixture
def scandir_calls(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    calls: list[str] = []
    real = os.scandir

    def counting(path: Any = ".") -> Any:
        calls.append(str(path))
        return real(path)
    monkeypatch.setattr(os, "scandir", counting)
    yield calls


async def _get(http: aiohttp.ClientSession, url: str) -> tuple[int, str]:
    async with http.get(url) as resp:
        return resp.status, await resp.text()


async def test_many_topics_load_behind_answering_listeners(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, scandir_calls: list[str]) -> None:
    write_data_path(tmp_path, TOPICS)
    monkeypatch.setattr(nsqd_module, "LOAD_SLICE", 0.0)  # one topic per turn of the loop
    server = NSQD(NsqdOptions(data_path=str(tmp_path), tcp_address="127.0.0.1:0", http_address="127.0.0.1:0"))
    await server.start()
    try:
        base = f"http://127.0.0.1:{server.http_port}"
        async with aiohttp.ClientSession() as http:
            assert await _get(http, f"{base}/ping") == (503, "LOADING")
            assert await _get(http, f"{base}/ready") == (503, "LOADING")
            # a client publishes to a topic the load has not reached yet
            reader, writer = await asyncio.open_connection("127.0.0.1", server.tcp_port)
            writer.write(MAGIC_V2 + commands.pub(f"t{TOPICS - 1}", b"published while loading"))
            assert await reader.readexactly(10) == struct.pack(">ii", 6, 0) + b"OK"
            writer.close()
            assert not server.loaded

            async with asyncio.timeout(60):
                while not server.loaded:
                    await asyncio.sleep(0.01)
            assert await _get(http, f"{base}/ping") == (200, "OK")
            assert await _get(http, f"{base}/ready") == (200, "OK")
            status, text = await _get(http, f"{base}/stats?format=json")
            topics = {t["topic_name"]: t for t in json.loads(text)["topics"]}
    finally:
        await server.stop()
    assert len(topics) == TOPICS
    assert all(sorted(c["channel_name"] for c in t["channels"]) == ["c0", "c1"] for t in topics.values())
    # the message on disk and the one published early both reached both channels
    assert [c["depth"] for c in topics[f"t{TOPICS - 1}"]["channels"]] == [2, 2]
    # 900 queues opened from one listing of the data path
    assert scandir_calls.count(str(tmp_path)) == 1
