"""nsqd.dat: which topics and channels exist and which are paused, kept across restarts.

Written whenever topics or channels change (not only at shutdown), never with ephemeral
ones, in Go nsqd's JSON shape, and read back at start.
"""
from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from nsqd import metadata
from tests.servers import Nsqd, http, wait_for

pytestmark = pytest.mark.timeout(60)

# as Go nsqd v1.3.0 writes it (json.Marshal of its metadata struct)
GO_WRITTEN = (b'{"topics":[{"channels":[{"name":"archive","paused":true},{"name":"live","paused":false}],'
              b'"name":"orders","paused":false},{"channels":[],"name":"clicks","paused":true}],'
              b'"version":"1.3.0"}')


def post(nsqd: Nsqd, path: str) -> None:
    status, body = http("POST", nsqd.url(path.replace("#", "%23")))
    assert status == 200, (path, status, body)


def data_dir(nsqd: Nsqd) -> Path:
    return nsqd.workdir / "data"


def saved(nsqd: Nsqd) -> dict | None:
    try:
        return json.loads((data_dir(nsqd) / "nsqd.dat").read_bytes())
    except (FileNotFoundError, ValueError):
        return None


def shape(doc: dict | None) -> dict:
    """topic -> (paused, {channel: paused}), the part of nsqd.dat that matters."""
    if doc is None:
        return {}
    return {t["name"]: (t["paused"], {c["name"]: c["paused"] for c in t["channels"]})
            for t in doc["topics"]}


def live(nsqd: Nsqd) -> dict:
    """The same shape, from /stats of the running nsqd."""
    return {t["topic_name"]: (t["paused"], {c["channel_name"]: c["paused"] for c in t["channels"]})
            for t in nsqd.stats()["topics"]}


def test_written_on_every_change_without_ephemeral_ones(servers) -> None:
    nsqd = servers.nsqd()
    post(nsqd, "/topic/create?topic=orders")
    wait_for(lambda: shape(saved(nsqd)) == {"orders": (False, {})}, message="topic saved")

    post(nsqd, "/channel/create?topic=orders&channel=archive")
    post(nsqd, "/channel/create?topic=orders&channel=live")
    post(nsqd, "/channel/create?topic=orders&channel=tail#ephemeral")
    post(nsqd, "/topic/create?topic=scratch#ephemeral")
    post(nsqd, "/channel/create?topic=scratch#ephemeral&channel=c")
    post(nsqd, "/channel/pause?topic=orders&channel=archive")
    post(nsqd, "/topic/create?topic=clicks")
    post(nsqd, "/topic/pause?topic=clicks")
    expected = {"orders": (False, {"archive": True, "live": False}), "clicks": (True, {})}
    wait_for(lambda: shape(saved(nsqd)) == expected, message="channels and pauses saved")
    assert "#ephemeral" not in (data_dir(nsqd) / "nsqd.dat").read_text()

    post(nsqd, "/channel/unpause?topic=orders&channel=archive")
    post(nsqd, "/channel/delete?topic=orders&channel=live")
    post(nsqd, "/topic/delete?topic=clicks")
    wait_for(lambda: shape(saved(nsqd)) == {"orders": (False, {"archive": False})},
             message="deletions and unpause saved")
    doc = saved(nsqd)
    assert doc is not None and isinstance(doc["version"], str) and doc["version"]
    leftovers = [p.name for p in data_dir(nsqd).iterdir() if p.name.startswith("nsqd.dat") and p.name != "nsqd.dat"]
    assert leftovers == [], "temporary metadata files left behind"


def test_restart_restores_topics_channels_and_pauses(servers) -> None:
    nsqd = servers.nsqd()
    for path in ("/topic/create?topic=orders", "/channel/create?topic=orders&channel=archive",
                 "/channel/create?topic=orders&channel=live", "/channel/pause?topic=orders&channel=live",
                 "/topic/create?topic=clicks", "/topic/pause?topic=clicks",
                 "/channel/create?topic=clicks&channel=c#ephemeral"):
        post(nsqd, path)
    before = {"orders": (False, {"archive": False, "live": True}), "clicks": (True, {})}
    assert nsqd.stop() == 0
    assert shape(saved(nsqd)) == before

    nsqd.start()
    assert live(nsqd) == before


def test_reads_the_file_go_nsqd_writes(servers) -> None:
    nsqd = servers.nsqd(start=False)
    data_dir(nsqd).mkdir(parents=True)
    (data_dir(nsqd) / "nsqd.dat").write_bytes(GO_WRITTEN)
    nsqd.start()
    assert live(nsqd) == {"orders": (False, {"archive": True, "live": False}), "clicks": (True, {})}


def test_sigint_also_saves_and_exits_cleanly(servers) -> None:
    nsqd = servers.nsqd()
    post(nsqd, "/topic/create?topic=orders")
    post(nsqd, "/channel/create?topic=orders&channel=archive")
    (data_dir(nsqd) / "nsqd.dat").unlink()  # only the shutdown can write it back now
    assert nsqd.proc is not None
    nsqd.signal(signal.SIGINT)
    assert nsqd.proc.wait(20) == 0
    nsqd.proc = None
    assert shape(saved(nsqd)) == {"orders": (False, {"archive": False})}


def test_corrupt_file_stops_the_start_and_is_kept(servers) -> None:
    nsqd = servers.nsqd(start=False)
    data_dir(nsqd).mkdir(parents=True)
    (data_dir(nsqd) / "nsqd.dat").write_bytes(b'{"topics": [{"name": "orders"')
    with pytest.raises(RuntimeError, match="exited with 1"):
        nsqd.start(timeout=15)
    nsqd.proc = None
    assert (data_dir(nsqd) / "nsqd.dat").read_bytes() == b'{"topics": [{"name": "orders"'


def test_encode_decode_round_trip_skips_invalid_names() -> None:
    topics = metadata.decode(GO_WRITTEN)
    assert metadata.decode(metadata.encode(topics, "1.3.0")) == topics
    assert json.loads(metadata.encode(topics, "1.3.0")) == json.loads(GO_WRITTEN)
    odd = b'{"topics":[{"name":"bad name!","channels":[]},{"name":"ok","channels":[{"name":"x y"}]}],"version":"1"}'
    assert metadata.decode(odd) == [metadata.TopicMeta("ok", False, [])]
