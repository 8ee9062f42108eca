"""Restart and shutdown time with many topics: one data path with N topics of two channels
each, as a cleanly stopped nsqd leaves it (``nsqd.dat`` and every queue's metadata file,
one message on disk per topic), started by each server in turn.

Figures per start: time to the first HTTP answer of any kind, time until loaded (Go
answers nothing before it has loaded everything, so its first ``/ping`` 200 is loaded;
ours answers at once and reports ``/ready`` 200 when loaded), RSS once loaded, and the
time from SIGTERM to exit. Asserts nothing.
"""
from __future__ import annotations

import json
import os
import signal
import struct
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pinning
from nsqd_proc import HOST, free_port

PAYLOAD = struct.pack(">qh", 1_700_000_000_000_000_000, 0) + b"0" * 16 + b"x" * 200


def write_data_path(path: Path, topics: int, channels: int = 2) -> None:
    """The files a clean stop of an nsqd with these topics leaves (NSQ's formats)."""
    path.mkdir(parents=True, exist_ok=True)
    doc = {"topics": [{"channels": [{"name": f"c{c}", "paused": False} for c in range(channels)],
                       "name": f"t{t}", "paused": False} for t in range(topics)],
           "version": "1.3.0"}
    (path / "nsqd.dat").write_text(json.dumps(doc))
    entry = struct.pack(">i", len(PAYLOAD)) + PAYLOAD
    for t in range(topics):
        (path / f"t{t}.diskqueue.000000.dat").write_bytes(entry)
        (path / f"t{t}.diskqueue.meta.dat").write_text(f"1\n0,0\n0,{len(entry)}\n")
        for c in range(channels):
            (path / f"t{t}:c{c}.diskqueue.meta.dat").write_text("0\n0,0\n0,0\n")


@dataclass
class Restart:
    first_answer_s: float
    loaded_s: float
    rss_mib: float
    stop_s: float


def _status(url: str) -> int | None:
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:
            return resp.status
    except urllib.error.HTTPError as e:
        return e.code
    except OSError:
        return None


def _rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def restart(command: list[str], data_path: Path, timeout: float = 600.0) -> Restart:
    tcp, http_port = free_port(), free_port()
    argv = [*command, f"--tcp-address={HOST}:{tcp}", f"--http-address={HOST}:{http_port}",
            f"--data-path={data_path}"]
    start = time.perf_counter()
    proc = subprocess.Popen(pinning.server_argv(argv), env=pinning.server_env(), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    first = loaded = 0.0
    base = f"http://{HOST}:{http_port}"
    try:
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"{command[0]} exited with {proc.returncode}")
            if time.perf_counter() - start > timeout:
                raise RuntimeError(f"{command[0]} did not load in {timeout}s")
            status = _status(f"{base}/ping")
            if status is not None and not first:
                first = time.perf_counter() - start
            if status == 200:
                ready = _status(f"{base}/ready")
                if ready in (200, 404):  # Go has no /ready: its /ping answers once loaded
                    loaded = time.perf_counter() - start
                    break
            time.sleep(0.005)
        rss = _rss_mib(proc.pid)
        t0 = time.perf_counter()
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout)
        stop = time.perf_counter() - t0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return Restart(first, loaded, rss, stop)
