"""/stats' memory section: Go nsqd's keys, and numbers that follow what nsqd holds.

The load is deferred messages (DPUB): each stays in nsqd as objects the garbage collector
tracks, so enough of them must set off a collection."""
from __future__ import annotations

import json
import time
from typing import Any

from nsq_protocol import commands as cmd
from nsqd.statsd import memory_lines
from tests.broker.conftest import Connect
from tests.servers import Nsqd, http

GO_MEMORY_KEYS = {"heap_objects", "heap_idle_bytes", "heap_in_use_bytes", "heap_released_bytes",
                  "gc_pause_usec_100", "gc_pause_usec_99", "gc_pause_usec_95", "next_gc_bytes", "gc_total_runs"}
BATCH = 10_000
MAX_BATCHES = 30  # 300k deferred messages: several times what one collection needs
DEADLINE = 120.0


def memory(server: Nsqd) -> dict[str, Any]:
    status, body = http("GET", server.url("/stats?format=json&include_clients=false"))
    assert status == 200, body
    return json.loads(body)["memory"]


def test_memory_has_every_key_go_nsqd_reports(servers: Any) -> None:
    mem = memory(servers.nsqd())
    assert GO_MEMORY_KEYS <= set(mem)
    assert all(isinstance(v, int) and v >= 0 for v in mem.values()), mem
    assert mem["heap_objects"] > 0 and mem["heap_in_use_bytes"] > 0
    assert mem["gc_pause_usec_100"] >= mem["gc_pause_usec_99"] >= mem["gc_pause_usec_95"]


def test_memory_numbers_follow_load_and_collections(servers: Any, connect: Connect) -> None:
    server = servers.nsqd()
    assert http("POST", server.url("/topic/create?topic=held"))[0] == 200
    assert http("POST", server.url("/channel/create?topic=held&channel=c"))[0] == 200
    before = memory(server)
    conn = connect(server)
    deadline = time.monotonic() + DEADLINE
    last, seen = before, [before]
    for batch in range(MAX_BATCHES):
        assert time.monotonic() < deadline, "nsqd is too slow to take the deferred messages"
        conn.send_raw(b"".join(cmd.dpub("held", 3_600_000, b"%d-%d" % (batch, i)) for i in range(BATCH)))
        for _ in range(BATCH):
            conn.expect_ok()
        now = memory(server)
        seen.append(now)
        if now["gc_total_runs"] == last["gc_total_runs"]:
            # no collection in between: the count towards the next one went down
            assert now["next_gc_objects"] < last["next_gc_objects"], (last, now)
        last = now
        if now["gc_total_runs"] > before["gc_total_runs"] and now["gc_pause_usec_100"] > 0:
            break
    else:
        raise AssertionError(f"no collection timed after {MAX_BATCHES * BATCH} deferred messages: {seen}")

    after = last
    assert after["gc_total_runs"] > before["gc_total_runs"]
    assert after["gc_pause_usec_100"] >= after["gc_pause_usec_99"] >= after["gc_pause_usec_95"] > 0
    # the deferred messages are held: more blocks, more resident heap
    assert after["heap_objects"] > before["heap_objects"] + BATCH
    assert after["heap_in_use_bytes"] > before["heap_in_use_bytes"]


def test_statsd_sends_the_same_memory_numbers_under_gos_names() -> None:
    mem = {"heap_objects": 7, "heap_idle_bytes": 1, "heap_in_use_bytes": 2, "heap_released_bytes": 0,
           "gc_pause_usec_100": 30, "gc_pause_usec_99": 20, "gc_pause_usec_95": 10, "next_gc_bytes": 0,
           "next_gc_objects": 5, "gc_total_runs": 12, "max_rss_bytes": 9}
    assert memory_lines(mem, last_gc_runs=10) == [
        "mem.heap_objects:7|g", "mem.heap_idle_bytes:1|g", "mem.heap_in_use_bytes:2|g",
        "mem.heap_released_bytes:0|g", "mem.gc_pause_usec_100:30|g", "mem.gc_pause_usec_99:20|g",
        "mem.gc_pause_usec_95:10|g", "mem.next_gc_bytes:0|g", "mem.gc_runs:2|c"]
