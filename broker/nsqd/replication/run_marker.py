"""Whether this data path's last run of nsqd stopped cleanly.

Without ``--sync-before-ack`` an nsqd keeps publishes in memory and writes them to disk
when it stops. One that did not stop (kill -9, an OOM kill, a lost machine) lost what
its memory queues held, acknowledged messages among them, while its backups hold their
copies. Restarted at once (as kubelet restarts a crashed container, well within a
failover timeout) it is not missed by its peers, so nothing would adopt those copies.
A file in ``<data-path>/replication/`` says a run is under way: made at start, removed
once a stop wrote every queue to disk. Found at start, the run before did not stop.
"""
from __future__ import annotations

import os

FILE = "running"


def left_running(directory: str) -> bool:
    return os.path.exists(os.path.join(directory, FILE))


def mark_running(directory: str) -> None:
    """Made durable before any publish is taken: a machine's crash must not lose it."""
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, FILE), "w") as f:
        f.write(f"nsqd pid {os.getpid()}\n")
        f.flush()
        os.fsync(f.fileno())
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def mark_stopped(directory: str) -> None:
    try:
        os.remove(os.path.join(directory, FILE))
    except FileNotFoundError:
        pass
