"""CPU seconds spent, and the largest resident memory, of a process and everything it
started, grouped by what each process is (Linux /proc only; a figure for the bench, not a
measuring instrument).

Processes come and go during a Spark run (Python workers, planner processes), so a
sampler thread reads every descendant's CPU time a few times a second and keeps the
last value seen for each. A process that lived less than one interval (a ``chmod`` a JVM
starts) is never seen, but its CPU time is added to its parent's once the parent reaps
it: what the parents' children's time grew by, less what the sampler had seen of the
children that went, is reported as role ``unsampled children``.
"""
from __future__ import annotations

import os
import threading
from collections import defaultdict
from typing import Callable

TICK = os.sysconf("SC_CLK_TCK")


PAGE = os.sysconf("SC_PAGE_SIZE")


UNSAMPLED = "unsampled children"


def _processes() -> dict[int, tuple[int, str, float, int, float]]:
    """pid -> (parent pid, command line, CPU seconds, resident bytes, CPU seconds of its
    reaped children) of every process we may read."""
    found: dict[int, tuple[int, str, float, int, float]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                stat = f.read()
            with open(f"/proc/{name}/cmdline", "rb") as f:
                command = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        found[int(name)] = (int(fields[1]), command, (int(fields[11]) + int(fields[12])) / TICK,
                            int(fields[21]) * PAGE, (int(fields[13]) + int(fields[14])) / TICK)
    return found


def default_role(command: str) -> str:
    if "python_streaming_source_runner" in command:
        return "driver reader (Python)"
    if "pyspark.daemon" in command or "pyspark.worker" in command or "pyspark.sql.worker" in command:
        return "Python workers"
    if "CoarseGrainedExecutorBackend" in command:
        return "executor JVM"
    if "deploy.master.Master" in command or "deploy.worker.Worker" in command:
        return "master+worker JVMs"
    if "java" in command.split(" ", 1)[0]:
        return "driver JVM"
    if "nsqd" in command:
        return "nsqd"
    return "other"


class ProcessMeter:
    """``with ProcessMeter() as meter: ...`` then ``meter.cpu_by_role()`` (CPU seconds
    spent inside the block by this process, role ``bench``, and its descendants) and
    ``meter.peak_rss_by_role()`` (the largest resident size seen of one process of each role)."""

    def __init__(self, root: int | None = None, role: Callable[[str], str] = default_role,
                 interval: float = 0.2) -> None:
        self.root = root or os.getpid()
        self.role = role
        self.interval = interval
        self._start: dict[int, float] = {}
        self._last: dict[int, tuple[str, float]] = {}
        self._children_start: dict[int, float] = {}   # pid -> its reaped children's CPU, at the start
        self._children: dict[int, float] = {}         # ... last seen
        self._parent: dict[int, int] = {}
        self._gone: set[int] = set()                  # seen, then reaped
        self._peak: dict[int, int] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="cpu-meter", daemon=True)

    def _descendants(self, table: dict[int, tuple[int, str, float, int, float]]) -> set[int]:
        children: dict[int, list[int]] = defaultdict(list)
        for pid, (parent, _, _, _, _) in table.items():
            children[parent].append(pid)
        found, todo = set(), [self.root]
        while todo:
            pid = todo.pop()
            found.add(pid)
            todo.extend(children.get(pid, []))
        return found

    def _sample(self) -> None:
        with self._lock:
            self._sample_locked()

    def _sample_locked(self) -> None:
        table = _processes()
        for pid in self._descendants(table):
            if pid in table:
                parent, command, cpu, rss, children = table[pid]
                if command:  # a zombie has none: keep what was seen while it ran
                    self._last[pid] = ("bench" if pid == self.root else self.role(command), cpu)
                    self._peak[pid] = max(rss, self._peak.get(pid, 0))
                    self._children[pid] = children
                    self._parent[pid] = parent
        self._gone.update(pid for pid in self._last if pid not in table)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self._sample()

    def __enter__(self) -> "ProcessMeter":
        self._sample()
        self._start = {pid: cpu for pid, (_, cpu) in self._last.items()}
        self._children_start = dict(self._children)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()

    def cpu_now(self) -> dict[str, float]:
        """CPU seconds spent so far inside the block, by role (sampled now): the
        difference of two of them is what a stretch of the run cost."""
        self._sample()
        with self._lock:
            return self.cpu_by_role()

    def cpu_by_role(self) -> dict[str, float]:
        spent: dict[str, float] = defaultdict(float)
        for pid, (role, cpu) in self._last.items():
            spent[role] += cpu - self._start.get(pid, 0.0)
        reaped = sum(self._children[pid] - self._children_start.get(pid, 0.0) for pid in self._children
                     if pid not in self._gone)
        seen_of_reaped = sum(self._last[pid][1] + self._children[pid]
                             - self._start.get(pid, 0.0) - self._children_start.get(pid, 0.0)
                             for pid in self._gone if self._parent.get(pid) in self._children)
        spent[UNSAMPLED] = max(0.0, reaped - seen_of_reaped)
        return dict(sorted(spent.items(), key=lambda item: -item[1]))

    def peak_rss_by_role(self) -> dict[str, int]:
        peak: dict[str, int] = defaultdict(int)
        for pid, (role, _) in self._last.items():
            peak[role] = max(peak[role], self._peak.get(pid, 0))
        return dict(peak)
