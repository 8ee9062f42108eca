"""A third-party client script run in its own interpreter: argv in, JSON lines out.

tornado (pynsq) and gevent (gnsq) each want to own their process, so every client runs
as ``sys.executable tests/interop/clients/<script>.py ...``. A reader thread collects
stdout lines as they come; stderr goes to a file quoted in failure messages.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Callable

from tests.servers import wait_for

CLIENTS_DIR = Path(__file__).parent / "clients"
Record = dict[str, object]


class ClientProcess:
    def __init__(self, script: str, args: list[str], workdir: Path) -> None:
        self.script = script
        # a Python script of CLIENTS_DIR, or a program's path (go-nsq's client)
        program = [sys.executable, str(CLIENTS_DIR / script)] if script.endswith(".py") else [script]
        self.argv = [*program, *args]
        self.stderr_path = workdir / f"{Path(script).stem}-{os.getpid()}-{id(self)}.stderr"
        self._records: list[Record] = []
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._reader: threading.Thread | None = None

    def start(self) -> "ClientProcess":
        with open(self.stderr_path, "wb") as stderr:
            self._proc = subprocess.Popen(self.argv, stdout=subprocess.PIPE, stderr=stderr,
                                          stdin=subprocess.DEVNULL, cwd=CLIENTS_DIR,
                                          start_new_session=True)
        self._reader = threading.Thread(target=self._read_stdout, daemon=True)
        self._reader.start()
        return self

    def _read_stdout(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        for line in self._proc.stdout:
            try:
                record = json.loads(line)
            except ValueError:
                record = {"unparsed": line.decode("utf-8", "replace")}
            with self._lock:
                self._records.append(record)

    def records(self) -> list[Record]:
        with self._lock:
            return list(self._records)

    def describe(self) -> str:
        try:
            stderr = self.stderr_path.read_text(errors="replace")[-4000:]
        except OSError:
            stderr = ""
        code = self._proc.poll() if self._proc else None
        return f"{self.script} (exit {code}, {len(self.records())} lines); stderr tail:\n{stderr}"

    def wait_until(self, predicate: Callable[[list[Record]], bool], timeout: float, what: str) -> None:
        """Wait until ``predicate(records)`` holds; fail at once if the client dies first."""
        def met() -> bool:
            if predicate(self.records()):
                return True
            if self._proc is not None and self._proc.poll() is not None:
                self._drain_reader()
                if predicate(self.records()):
                    return True
                raise RuntimeError(f"client exited before {what}: {self.describe()}")
            return False
        try:
            wait_for(met, timeout, message=what)
        except AssertionError as e:
            raise AssertionError(f"{e}; {self.describe()}") from None

    def wait_exit(self, timeout: float) -> int:
        assert self._proc is not None
        try:
            code = self._proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"{self.script} still running after {timeout}s; {self.describe()}")
        self._drain_reader()
        return code

    def stop(self, timeout: float = 5.0) -> None:
        """SIGTERM, then SIGKILL; all output read so far stays available."""
        if self._proc is None or self._proc.poll() is not None:
            self._drain_reader()
            return
        os.killpg(self._proc.pid, signal.SIGTERM)
        try:
            self._proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
        self._drain_reader()

    def kill(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            os.killpg(self._proc.pid, signal.SIGKILL)
            self._proc.wait(10)
        self._drain_reader()

    def _drain_reader(self) -> None:
        if self._reader is not None:
            self._reader.join(5)


class Clients:
    """Every client a test started; ``close`` kills the ones still running."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.started: list[ClientProcess] = []

    def start(self, script: str, *args: object) -> ClientProcess:
        client = ClientProcess(script, [str(a) for a in args], self.workdir)
        self.started.append(client)
        return client.start()

    def close(self) -> None:
        for client in self.started:
            client.kill()
