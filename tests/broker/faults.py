"""Syscall-level faults for real nsqd processes, without changing nsqd: a prefix put
before its command line.

- ``slow_fsync(us)``: strace delays every fsync and fdatasync of nsqd (all its threads)
  by ``us`` microseconds on entry, as a slow disk would (``after``: from a thread's
  ``after + 1``-th on, a disk that turns slow mid-run; ``lasting``: for that many, then
  fast again). With ``--seccomp-bpf`` only those calls stop the process; the rest runs
  at full speed.
- ``FakeClock``: libfaketime (Debian's ``faketime`` package) preloaded into nsqd, its
  offset read from a file that ``jump`` rewrites mid-run. ``monotonic=False`` fakes only
  the wall clock (``time.time``: an NTP step or an operator's ``date -s``); with
  ``monotonic=True`` CLOCK_MONOTONIC jumps too (what a process sees when its VM was
  suspended: asyncio's loop and every timeout use it).

``WrappedNsqd`` runs nsqd under such a prefix; kill -9 and stop go to its process
group, so the wrapper and nsqd end together."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any, Sequence

from tests.servers import Nsqd, wait_for

STRACE = "/usr/bin/strace"
FAKETIME_LIB = "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1"  # the threads-safe build


def strace_available() -> bool:
    return Path(STRACE).exists() or shutil.which("strace") is not None


def faketime_available() -> bool:
    return Path(FAKETIME_LIB).exists()


def slow_fsync(delay_us: int, log: Path | None = None, after: int = 0, lasting: int = 0) -> list[str]:
    """The command prefix that delays every fsync/fdatasync by ``delay_us``; with
    ``after``, only those after the first ``after`` of a thread (a disk that turns slow
    mid-run); with ``lasting``, only that many of a thread's from there (a disk slow for
    a while, then fast again)."""
    if lasting:
        when = f":when={after + 1}..{after + lasting}"
    else:
        when = f":when={after + 1}+" if after else ""
    return [shutil.which("strace") or STRACE, "-f", "--seccomp-bpf", "-qq", "-o", str(log or "/dev/null"),
            "-e", "trace=fsync,fdatasync", "-e", f"inject=fsync,fdatasync:delay_enter={delay_us}{when}"]


class FakeClock:
    """An offset from the real clocks, in a file libfaketime re-reads at most every
    ``FAKETIME_CACHE_DURATION`` (1 s): a ``jump`` is seen by nsqd within a second."""

    def __init__(self, path: Path, *, monotonic: bool) -> None:
        self.path = Path(path)
        self.monotonic = monotonic
        self.offset = 0
        self._write()

    def _write(self) -> None:
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(f"{self.offset:+d}\n")
        tmp.replace(self.path)  # never read half-written

    def jump(self, seconds: int) -> None:
        self.offset += seconds
        self._write()

    def prefix(self) -> list[str]:
        env = [f"LD_PRELOAD={FAKETIME_LIB}", f"FAKETIME_TIMESTAMP_FILE={self.path}",
               "FAKETIME_CACHE_DURATION=1"]
        if not self.monotonic:
            env.append("FAKETIME_DONT_FAKE_MONOTONIC=1")
        return ["env", *env]


class WrappedNsqd(Nsqd):
    """nsqd run under ``prefix`` (exec'd in the same process group)."""

    def __init__(self, workdir: Path, flags: dict[str, Any], host: str, prefix: Sequence[str]) -> None:
        super().__init__(workdir, flags, host=host)
        self.prefix = list(prefix)

    def argv(self) -> list[str]:
        return [*self.prefix, *super().argv()]


def clock_offset(node: Nsqd) -> float:
    """How far ahead of ours nsqd's wall clock is, read from its HTTP Date header (to
    the second)."""
    from email.utils import parsedate_to_datetime
    import time
    answer = node.get("/ping")
    return parsedate_to_datetime(answer.headers["Date"]).timestamp() - time.time()


def wait_clock_seen(node: Nsqd, clock: FakeClock, timeout: float = 10.0) -> None:
    """Until nsqd's clock shows ``clock``'s offset (libfaketime re-reads it within 1 s)."""
    wait_for(lambda: abs(clock_offset(node) - clock.offset) < 3, timeout,
             message=f"nsqd's clock {clock.offset:+d}s off")


class WorkerFsyncStall:
    """The next fsync (or fdatasync) of each of a running process's threads but its main
    one waits ``delay_us``: strace attached to those threads alone, for as long as this
    is open. nsqd's replica store fsyncs in worker threads before it acknowledges a copy,
    while the main thread goes on (answering pings and PULLs, fencing), so its
    acknowledgements stall and nothing else does."""

    def __init__(self, pid: int, delay_us: int) -> None:
        tasks = sorted(int(t.name) for t in Path(f"/proc/{pid}/task").iterdir() if int(t.name) != pid)
        assert tasks, f"process {pid} has no thread but its main one"
        attach = [arg for tid in tasks for arg in ("-p", str(tid))]
        self.proc = subprocess.Popen([shutil.which("strace") or STRACE, "-qq", "-o", "/dev/null",
                                      "-e", "trace=fsync,fdatasync",
                                      "-e", f"inject=fsync,fdatasync:delay_enter={delay_us}:when=1..1", *attach])
        wait_for(lambda: all(_traced(pid, tid) for tid in tasks), 10, interval=0.01,
                 message="strace attached to every worker thread")

    def close(self) -> None:
        self.proc.terminate()  # strace detaches, and a delayed call goes on
        self.proc.wait(10)

    def __enter__(self) -> "WorkerFsyncStall":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _traced(pid: int, tid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/task/{tid}/status").read_text()
    except FileNotFoundError:
        return True  # the thread ended
    return next(int(line.split()[1]) for line in status.splitlines() if line.startswith("TracerPid:")) != 0
