"""How a driver program asks a running NSQ source to drain before it stops the query.

Spark gives a program no channel to its source: the reader lives in a Python worker the
JVM started. Both run on the driver's machine, so they meet at a file (the source option
``drain_file``): the program writes ``drain``; the reader, at its next offset request,
takes no more messages (RDY 0, those not in a batch go back to nsqd), lets Spark run the
empty batch that commits the last one, FINs it, and writes ``drained``. The program then
stops the query with nothing left in flight, so a restart redelivers nothing.
"""
from __future__ import annotations

import os
import time
from pathlib import Path

REQUESTED = "drain"
DONE = "drained"


class DrainSignal:
    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)

    # -- the program's side ---------------------------------------------------------
    def request(self) -> None:
        self._write(REQUESTED)

    def is_drained(self) -> bool:
        try:
            return self.path.read_text().strip() == DONE
        except OSError:
            return False

    def wait_drained(self, timeout: float, poll: float = 0.1) -> bool:
        """True once the reader reported it drained; False after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while not self.is_drained():
            if time.monotonic() > deadline:
                return False
            time.sleep(poll)
        return True

    def clear(self) -> None:
        self.path.unlink(missing_ok=True)

    # -- the reader's side ------------------------------------------------------------
    def is_requested(self) -> bool:
        return self.path.exists()

    def report_drained(self) -> None:
        if not self.is_drained():
            self._write(DONE)

    def _write(self, text: str) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        partial = self.path.with_name(self.path.name + ".tmp")
        partial.write_text(text)
        os.replace(partial, self.path)
