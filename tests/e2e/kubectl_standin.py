"""A stand-in ``kubectl`` for the kind scripts' functions: a small program put first on
PATH that answers each exact argument list with canned output and exit status (a list
of replies is given in turn, the last one repeated), records every call of a run (and
what was piped into ``apply -f -``), and answers anything it was not told about with
status 97, so a test can tell an unexpected call from a NotFound."""
from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

UNANSWERED = 97

_PROGRAM = '''#!{python}
import json, os, sys
here = os.path.dirname(os.path.abspath(__file__))
args = sys.argv[1:]
stdin = sys.stdin.read() if args[-2:] == ["-f", "-"] else None
log = os.path.join(here, "calls.jsonl")
with open(log, "a+", encoding="utf-8") as calls:
    calls.seek(0)
    asked_before = sum(json.loads(line)["args"] == args for line in calls)
    calls.write(json.dumps({{"args": args, "stdin": stdin}}) + "\\n")
with open(os.path.join(here, "answers.json"), encoding="utf-8") as answers:
    for answer in json.load(answers):
        if answer["args"] == args:
            reply = answer["replies"][min(asked_before, len(answer["replies"]) - 1)]
            sys.stderr.write(reply["stderr"])
            sys.stdout.write(reply["stdout"])
            sys.stdout.flush()
            sys.exit(reply["status"])
sys.stderr.write("stand-in kubectl: no answer for " + json.dumps(args) + "\\n")
sys.exit({unanswered})
'''


@dataclass
class Call:
    args: list[str]
    stdin: str | None


@dataclass
class StandInKubectl:
    directory: Path
    namespace: str
    _answers: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        program = self.directory / "kubectl"
        program.write_text(_PROGRAM.format(python=sys.executable, unanswered=UNANSWERED), encoding="utf-8")
        program.chmod(program.stat().st_mode | stat.S_IXUSR)

    def answer(self, *args: str, stdout: str = "", status: int = 0, stderr: str = "") -> None:
        """``kubectl ARGS`` prints STDOUT and exits with STATUS (the last answer given wins)."""
        self.answer_in_turn(list(args), [stdout], status=status, stderr=stderr)

    def answer_in_turn(self, args: list[str], stdouts: list[str], status: int = 0, stderr: str = "") -> None:
        """The n-th ``kubectl ARGS`` of a run prints the n-th of STDOUTS, later ones the last."""
        replies = [{"stdout": out, "status": status, "stderr": stderr} for out in stdouts]
        self._answers.insert(0, {"args": args, "replies": replies})

    def answer_k(self, *args: str, stdout: str = "", status: int = 0, stderr: str = "") -> None:
        """The same for lib.sh's ``k ARGS`` (kubectl in the scenario's namespace)."""
        self.answer("--namespace", self.namespace, *args, stdout=stdout, status=status, stderr=stderr)

    def not_found(self, *args: str) -> None:
        self.answer_k(*args, status=1, stderr=f'Error from server (NotFound): {args[1]} "{args[2]}" not found\n')

    def calls(self) -> list[Call]:
        """The calls of the last run."""
        log = self.directory / "calls.jsonl"
        if not log.exists():
            return []
        return [Call(**json.loads(line)) for line in log.read_text(encoding="utf-8").splitlines()]

    def unanswered(self) -> list[list[str]]:
        known = [a["args"] for a in self._answers]
        return [c.args for c in self.calls() if c.args not in known]

    def run(self, script: str, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
        """SCRIPT in bash with ARGS as "$@", this kubectl first on PATH."""
        (self.directory / "answers.json").write_text(json.dumps(self._answers), encoding="utf-8")
        (self.directory / "calls.jsonl").unlink(missing_ok=True)
        path = f"{self.directory}{os.pathsep}{os.environ['PATH']}"
        return subprocess.run(["bash", "-c", script, "-", *args], capture_output=True, text=True, timeout=60,
                              env={"PATH": path, "NAMESPACE": self.namespace, **env})
