"""A Spark standalone cluster on this machine: one master and one worker, separate JVMs
started from pyspark's own jars (``bin/spark-class``), bound to 127.0.0.1 on free ports,
with their own work and log directories. The worker starts executor JVMs for every
application that connects to ``cluster.url``. Used by the cluster tests and the bench.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import pyspark

from tests.servers import HOST, free_port, wait_for

SPARK_HOME = Path(pyspark.__file__).resolve().parent


def java_missing() -> str | None:
    """Why a cluster cannot start here, or None."""
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        return "no Java: Spark's master and worker are JVMs (make install puts Java 17 in place)"
    return None



def children_of(parent: int, marker: bytes) -> list[int]:
    """The processes whose parent is ``parent`` and whose command line holds ``marker``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            command = (entry / "cmdline").read_bytes()
        except OSError:
            continue  # gone meanwhile
        if int(stat[stat.rindex(")") + 2:].split()[1]) == parent and marker in command:
            found.append(int(entry.name))
    return found

@dataclass
class StandaloneCluster:
    root: Path
    cores: int = 2
    worker_memory: str = "1g"          # what the worker offers to all executors together
    daemon_java_options: str = ""      # for the master and the worker (not the executors)
    master_port: int = field(default_factory=free_port)
    master_ui_port: int = field(default_factory=free_port)
    worker_port: int = field(default_factory=free_port)
    worker_ui_port: int = field(default_factory=free_port)
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return f"spark://{HOST}:{self.master_port}"

    @property
    def work_dir(self) -> Path:
        return self.root / "work"    # one directory per application, executors' stdout/stderr inside

    @property
    def log_dir(self) -> Path:
        return self.root / "logs"

    def environment(self) -> dict[str, str]:
        return {**os.environ,
                "SPARK_HOME": str(SPARK_HOME),
                "SPARK_LOCAL_IP": HOST,               # every JVM (and web UI) binds to loopback
                "SPARK_LOG_DIR": str(self.log_dir),
                "SPARK_WORKER_DIR": str(self.work_dir),
                "SPARK_DAEMON_MEMORY": "256m",
                "SPARK_DAEMON_JAVA_OPTS": self.daemon_java_options,
                "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false",  # no fixed port 6066
                "PYSPARK_PYTHON": sys.executable}     # executors' Python workers: this venv

    def _start(self, name: str, *args: str) -> None:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        with open(self.log_dir / f"{name}.out", "wb") as out:
            self.processes[name] = subprocess.Popen(
                [str(SPARK_HOME / "bin" / "spark-class"), *args], stdout=out, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, env=self.environment(), start_new_session=True)

    def master_state(self) -> dict:
        with urllib.request.urlopen(f"http://{HOST}:{self.master_ui_port}/json/", timeout=5) as answer:
            return json.load(answer)

    def alive_workers(self) -> list[dict]:
        try:
            state = self.master_state()
        except ValueError:  # the master's web UI answers before its JSON page is ready
            return []
        return [w for w in state["workers"] if w["state"] == "ALIVE"]

    def start(self, timeout: float = 120.0) -> "StandaloneCluster":
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self._start("master", "org.apache.spark.deploy.master.Master", "--host", HOST,
                    "--port", str(self.master_port), "--webui-port", str(self.master_ui_port))
        self._start("worker", "org.apache.spark.deploy.worker.Worker", "--host", HOST,
                    "--port", str(self.worker_port), "--webui-port", str(self.worker_ui_port),
                    "--cores", str(self.cores), "--memory", self.worker_memory,
                    "--work-dir", str(self.work_dir), self.url)
        try:
            def up() -> bool:
                for name, process in self.processes.items():
                    assert process.poll() is None or self._fail(f"the {name} exited with {process.returncode}")
                return len(self.alive_workers()) == 1
            wait_for(up, timeout, interval=0.25, message="the worker registered with the master")
        except BaseException:
            self.stop()
            raise
        return self

    def _fail(self, what: str) -> bool:
        logs = "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-3000:]}"
                         for p in sorted(self.log_dir.glob("*.out")))
        raise RuntimeError(f"{what}\n{logs}")

    def executor_pids(self) -> list[int]:
        """The executor JVMs the worker runs now (children of the worker's JVM)."""
        worker = self.processes.get("worker")
        return [] if worker is None else children_of(worker.pid, b"CoarseGrainedExecutorBackend")

    def stop(self, timeout: float = 20.0) -> None:
        """The worker (its executors share its process group) first, then the master."""
        for name in ("worker", "master"):
            process = self.processes.pop(name, None)
            if process is None:
                continue
            for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 5.0)):
                try:
                    os.killpg(process.pid, sig)
                except ProcessLookupError:
                    break
                try:
                    process.wait(wait)
                    break
                except subprocess.TimeoutExpired:
                    continue
            try:
                os.killpg(process.pid, signal.SIGKILL)  # executors left behind by the worker
            except ProcessLookupError:
                pass
