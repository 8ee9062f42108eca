"""A node's CPU for one process on a shared machine: a cgroup with a CFS quota, which is what
kubelet gives a container for ``resources.limits.cpu``. Several nsqds on one machine, each
under its own limit, then each get what a node (or pod) of that size would give it, instead
of taking CPU from one another (``bench/replication.py --node-cpu``).

cgroup v1's ``cpu`` hierarchy or cgroup v2 with the ``cpu`` controller; as root."""
from __future__ import annotations

import os
import time
from pathlib import Path

PERIOD_US = 100_000
_V1 = Path("/sys/fs/cgroup/cpu")
_V2 = Path("/sys/fs/cgroup")


def _root() -> tuple[Path, bool]:
    if (_V1 / "cpu.cfs_quota_us").is_file():
        return _V1, False
    controllers = _V2 / "cgroup.controllers"
    if controllers.is_file() and "cpu" in controllers.read_text().split():
        return _V2, True
    raise RuntimeError("no cgroup cpu controller to limit a process's CPU with")


class CpuLimit:
    """One cgroup allowed ``cpus`` CPUs (0.5: 50 ms of every 100 ms)."""

    _made = 0

    def __init__(self, cpus: float) -> None:
        if cpus <= 0:
            raise ValueError(f"a CPU limit must be above 0, not {cpus}")
        root, self._v2 = _root()
        CpuLimit._made += 1
        self.path = root / f"nsq-bench-{os.getpid()}-{CpuLimit._made}"
        self.path.mkdir()
        quota = max(1000, int(cpus * PERIOD_US))
        if self._v2:
            (self.path / "cpu.max").write_text(f"{quota} {PERIOD_US}")
        else:
            (self.path / "cpu.cfs_period_us").write_text(str(PERIOD_US))
            (self.path / "cpu.cfs_quota_us").write_text(str(quota))

    def argv(self, argv: list[str]) -> list[str]:
        """``argv`` run inside the cgroup (a shell joins it, then execs the command)."""
        return ["sh", "-c", 'echo $$ > "$0/cgroup.procs" && exec "$@"', str(self.path), *argv]

    def throttled_seconds(self) -> float:
        """How long the quota held the group's processes back, in all."""
        for line in (self.path / "cpu.stat").read_text().splitlines():
            key, value = line.split()
            if key == "throttled_time":  # v1: nanoseconds
                return int(value) / 1e9
            if key == "throttled_usec":  # v2
                return int(value) / 1e6
        return 0.0

    def close(self) -> None:
        """Remove the cgroup once its processes have exited (they must have been stopped)."""
        deadline = time.monotonic() + 10
        while True:
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
