"""Ports handed out by one process stay out of every other process's reach while it lives.

A port picked as free is not bound until its server starts, and a server being restarted
leaves its ports unbound for a while: in that window another process (another test worker,
a demo next to the tests) saw the port as free, took it, and the restart failed with
"address already in use" (seen in CI). Each handed-out port is held as a one-byte POSIX
record lock at offset ``port`` in one shared file: the kernel drops a process's locks when
it ends, however it ends, so nothing is left to clean up and one descriptor holds them all.
"""
from __future__ import annotations

import fcntl
import os
import tempfile
import threading
from pathlib import Path

_LOCK_FILE = Path(tempfile.gettempdir()) / "nsq-local-ports.lock"

_fd: int | None = None
_fd_pid: int | None = None
_lock = threading.Lock()


def _descriptor() -> int | None:
    """The shared file, opened once per process (record locks belong to the process, and
    closing any descriptor of the file would drop them all, so it is never closed)."""
    global _fd, _fd_pid
    if _fd is None or _fd_pid != os.getpid():  # a forked child holds none of its parent's locks
        try:
            _fd = os.open(_LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o666)
        except OSError:
            return None  # no shared file: fall back to this process's own bookkeeping
        _fd_pid = os.getpid()
    return _fd


def reserve(port: int) -> bool:
    """Hold ``port`` for this process; False when another living process holds it."""
    with _lock:
        fd = _descriptor()
        if fd is None:
            return True
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, port, os.SEEK_SET)
        except OSError:
            return False
        return True
