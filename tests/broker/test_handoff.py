"""Scale-down drain (POST /drain?handoff=...) with real nsqd processes: the backlog on
disk goes to the other nsqds (every channel there receives every message at least
once), is removed here, and the node stays up with TCP closed until a signal; a handoff
no target takes leaves the data where it was and can be retried."""
from __future__ import annotations

import json
import signal
import socket
import time
from pathlib import Path
from typing import Any, Callable

import pytest

from tests.broker.wire import WireConn
from tests.conftest import Servers
from tests.servers import HOST, Nsqd, free_port, wait_for

Connect = Callable[..., WireConn]


@pytest.fixture(scope="module")
def receivers(module_servers: Servers) -> tuple[Nsqd, Nsqd]:
    """Two nsqds that only receive handoffs; each test uses its own topics on them."""
    return module_servers.nsqd(), module_servers.nsqd()


def subscribe(connect: Connect, server: Nsqd, topic: str, channel: str, rdy: int) -> WireConn:
    conn = connect(server)
    conn.sub(topic, channel)
    conn.expect_ok()
    conn.rdy(rdy)
    return conn


def hand_off(server: Nsqd, *targets: str, timeout: float = 20.0) -> dict[str, Any]:
    """POST /drain?handoff=...; the handoff object once its attempt is over."""
    answer = server.post("/drain?handoff=" + ",".join(targets))
    assert answer.status == 200, answer.body
    return wait_for(lambda: (h := server.get_json("/drain")["handoff"])["finished"] and h, timeout,
                    message="the handoff attempt ends")


def queue_files(server: Nsqd) -> list[str]:
    return sorted(p.name for p in (server.workdir / "data").iterdir() if ".diskqueue." in p.name)


def metadata_topics(server: Nsqd) -> list[str]:
    doc = json.loads((Path(server.workdir) / "data" / "nsqd.dat").read_bytes())
    return [t["name"] for t in doc["topics"]]


def received_bodies(conn: WireConn, n: int, timeout: float = 10.0) -> list[bytes]:
    messages = conn.read_messages(n, timeout)
    for m in messages:
        conn.fin(m.id)
    assert all(m.attempts == 1 for m in messages)  # attempt counts start again on the target
    return [m.body for m in messages]


def holder(topic: str, *targets: Nsqd) -> Nsqd:
    (found,) = [t for t in targets if t.topic(topic) is not None]
    return found


def exits_with(server: Nsqd, sig: int, timeout: float) -> int:
    assert server.proc is not None
    server.signal(sig)
    code = server.proc.wait(timeout)
    server.proc = None
    return code


def test_backlog_reaches_every_channel_on_the_targets_and_leaves_this_disk(
        servers: Servers, receivers: tuple[Nsqd, Nsqd], connect: Connect, topic: str) -> None:
    source = servers.nsqd(drain_timeout="1s", mem_queue_size=5)  # most of it on disk, some in memory
    targets = list(receivers)
    main, side = topic, f"{topic}-side"
    assert source.post(f"/topic/create?topic={main}").status == 200
    for channel in ("fast", "slow"):
        assert source.post(f"/channel/create?topic={main}&channel={channel}").status == 200
    bodies = {f"m-{i}".encode() for i in range(40)}
    assert source.post(f"/mpub?topic={main}", b"\n".join(sorted(bodies))).status == 200
    deferred = {b"d-0", b"d-1"}
    for body in sorted(deferred):
        assert source.post(f"/pub?topic={main}&defer=4000", body).status == 200
    side_bodies = {f"s-{i}".encode() for i in range(10)}
    assert source.post(f"/topic/create?topic={side}").status == 200
    assert source.post(f"/channel/create?topic={side}&channel=only").status == 200
    assert source.post(f"/mpub?topic={side}", b"\n".join(sorted(side_bodies))).status == 200

    fast = subscribe(connect, source, main, "fast", rdy=15)
    taken = fast.read_messages(15)
    fast.rdy(0)
    for m in taken:
        fast.fin(m.id)
    finished_on_source = {m.body for m in taken}
    wait_for(lambda: source.channel(main, "fast")["in_flight_count"] == 0, 5, message="the FINs")  # type: ignore[index]
    fast.close()
    slow = subscribe(connect, source, main, "slow", rdy=5)
    slow.read_messages(5)  # never answered: requeued at the drain timeout

    handoff = hand_off(source, *(t.http_address for t in targets))
    assert handoff["error"] is None, handoff
    assert handoff["targets"] == [t.http_address for t in targets]
    assert handoff["topics"] == {main: 42, side: 10} and handoff["messages"] == 52
    assert handoff["topics_left"] == [] and handoff["messages_left"] == 0
    state = source.get_json("/drain")
    assert state["in_flight_requeued_at_timeout"] == 5 and state["finished_at"] is not None
    assert source.stats()["drain"]["handoff"]["topics"] == handoff["topics"]

    # one topic per target, each with the source's channels; deferred ones still wait there
    main_target, side_target = holder(main, *targets), holder(side, *targets)
    assert {main_target.http_port, side_target.http_port} == {t.http_port for t in targets}
    for channel in ("fast", "slow"):
        stats = main_target.channel(main, channel)
        assert stats is not None and stats["deferred_count"] == 2, stats

    everything = bodies | deferred
    slow_there = received_bodies(subscribe(connect, main_target, main, "slow", rdy=50), 42)
    assert set(slow_there) == everything and len(slow_there) == 42
    fast_there = received_bodies(subscribe(connect, main_target, main, "fast", rdy=50), 42)
    duplicates = [b for b in fast_there if b in finished_on_source]
    assert set(fast_there) == everything and len(duplicates) == 15  # the trade-off: at least once
    assert set(received_bodies(subscribe(connect, side_target, side, "only", rdy=20), 10)) == side_bodies

    # nothing of it stays here, and the node stays up with TCP closed
    assert queue_files(source) == [] and metadata_topics(source) == []
    assert source.stats()["topics"] == []
    assert source.get("/ready").status == 503
    assert source.get("/ping").status == 200
    assert source.get("/info").status == 200
    for method, path in (("POST", f"/pub?topic={main}"), ("POST", f"/topic/create?topic={main}"),
                         ("POST", f"/channel/empty?topic={main}&channel=slow"), ("GET", "/config/log_level")):
        answer = source.post(path, b"x") if method == "POST" else source.get(path)
        assert (answer.status, answer.json()) == (503, {"message": "EXITING"}), path
    try:
        socket.create_connection((HOST, source.tcp_port), timeout=2).close()
        raise AssertionError("TCP still accepts connections")
    except ConnectionRefusedError:
        pass
    assert source.post("/drain").status == 200  # a plain drain request changes nothing now
    assert source.get("/ping").status == 200
    assert exits_with(source, signal.SIGTERM, 5) == 0


def test_failed_handoff_keeps_the_data_and_a_retry_fails_over_to_a_live_target(
        servers: Servers, receivers: tuple[Nsqd, Nsqd], topic: str) -> None:
    source = servers.nsqd(mem_queue_size=2)
    bodies = [f"b-{i}".encode() for i in range(20)]
    source.post(f"/topic/create?topic={topic}")
    source.post(f"/channel/create?topic={topic}&channel=c")
    assert source.post(f"/mpub?topic={topic}", b"\n".join(bodies)).status == 200
    dead = f"{HOST}:{free_port()}"

    failed = hand_off(source, dead)
    assert failed["error"] and dead in failed["error"] and topic in failed["error"], failed
    assert failed["topics"] == {} and failed["topics_left"] == [topic] and failed["messages_left"] == 20
    files = queue_files(source)
    assert f"{topic}:c.diskqueue.meta.dat" in files and metadata_topics(source) == [topic]
    assert source.get("/ready").status == 503

    assert exits_with(source, signal.SIGTERM, 5) == 0
    source.start()  # a plain restart serves the backlog again
    channel = source.channel(topic, "c")
    assert channel is not None and channel["depth"] == 20
    assert source.get("/ready").status == 200

    assert hand_off(source, dead)["error"]
    live = receivers[0]
    retried = hand_off(source, dead, live.http_address)
    assert retried["error"] is None and retried["attempts"] == 2, retried
    assert retried["topics"] == {topic: 20} and retried["targets"] == [dead, live.http_address]
    wait_for(lambda: live.channel(topic, "c")["depth"] == 20, 5, message="the backlog on the live target")  # type: ignore[index]
    assert queue_files(source) == [] and metadata_topics(source) == []


def test_large_backlog_in_two_channels_is_handed_off_once_and_quickly(
        servers: Servers, receivers: tuple[Nsqd, Nsqd], topic: str) -> None:
    source = servers.nsqd(mem_queue_size=100)
    target = receivers[1]
    source.post(f"/topic/create?topic={topic}")
    for channel in ("a", "b"):
        source.post(f"/channel/create?topic={topic}&channel={channel}")
    total, batch = 20_000, 2_000
    for start in range(0, total, batch):
        body = b"\n".join(b"%06d" % i for i in range(start, start + batch))
        assert source.post(f"/mpub?topic={topic}", body).status == 200

    started = time.monotonic()
    handoff = hand_off(source, target.http_address, timeout=60)
    elapsed = time.monotonic() - started
    assert handoff["error"] is None and handoff["topics"] == {topic: total}, handoff
    assert elapsed < 30, f"handoff of {total} messages took {elapsed:.1f}s"
    for channel in ("a", "b"):
        stats = target.channel(topic, channel)
        assert stats is not None and stats["depth"] == total, stats
    assert queue_files(source) == []


def test_a_plain_drain_becomes_a_scale_down_and_a_signal_then_cuts_its_wait_short(
        servers: Servers, receivers: tuple[Nsqd, Nsqd], connect: Connect, topic: str) -> None:
    source = servers.nsqd(drain_timeout="60s", drain_accept_publishes="true")
    target = receivers[0]
    assert source.post(f"/pub?topic={topic}", b"held").status == 200
    sub = subscribe(connect, source, topic, "c", rdy=1)
    sub.read_message()

    assert source.post("/drain?handoff=").json() == {"message": "INVALID_HANDOFF"}
    assert source.post("/drain?handoff=no-port").status == 400
    assert source.get("/drain").json()["draining"] is False

    assert source.post("/drain").json()["handoff"] is None
    state = source.post(f"/drain?handoff={target.http_address}").json()
    assert state["handoff"]["targets"] == [target.http_address] and state["handoff"]["finished"] is False
    # a scale-down refuses publishes, --drain-accept-publishes notwithstanding
    assert source.post(f"/pub?topic={topic}", b"late").json() == {"message": "DRAINING"}
    source.signal(signal.SIGTERM)  # during the wait: cuts it short, does not exit
    handoff = wait_for(lambda: (h := source.get_json("/drain")["handoff"])["finished"] and h, 15,
                       message="the handoff")
    assert handoff["error"] is None and handoff["topics"] == {topic: 1}
    assert source.proc is not None and source.proc.poll() is None
    redelivered = subscribe(connect, target, topic, "c", rdy=1).read_message()
    assert redelivered.body == b"held"
    assert exits_with(source, signal.SIGINT, 5) == 0
