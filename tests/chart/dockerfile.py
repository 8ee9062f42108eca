"""Reading the Dockerfile and the build context Docker would send (``.dockerignore``
applied), for the tests of an image no engine here can build."""
from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from tests.chart.render import ROOT

DOCKERFILE = ROOT / "Dockerfile"
DOCKERIGNORE = ROOT / ".dockerignore"


@dataclass(frozen=True)
class Instruction:
    keyword: str
    arguments: str

    @property
    def words(self) -> list[str]:
        return shlex.split(self.arguments)


@dataclass
class Stage:
    base: str
    name: str | None
    instructions: list[Instruction] = field(default_factory=list)

    def all(self, keyword: str) -> list[Instruction]:
        return [i for i in self.instructions if i.keyword == keyword]


def instructions(text: str) -> list[Instruction]:
    """Logical lines: comments dropped, backslash continuations joined."""
    out, pending = [], ""
    for line in text.splitlines():
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        logical = (pending + line).strip()
        pending = ""
        keyword, _, arguments = logical.partition(" ")
        out.append(Instruction(keyword.upper(), arguments.strip()))
    return out


def stages(text: str) -> tuple[dict[str, str], list[Stage]]:
    """The global ARG defaults and the stages, with ${ARG} in FROM resolved."""
    args: dict[str, str] = {}
    found: list[Stage] = []
    for instruction in instructions(text):
        if instruction.keyword == "FROM":
            words = instruction.words
            base = re.sub(r"\$\{(\w+)\}", lambda m: args[m.group(1)], words[0])
            found.append(Stage(base, words[2] if len(words) > 2 and words[1].upper() == "AS" else None))
        elif not found and instruction.keyword == "ARG":
            name, _, default = instruction.arguments.partition("=")
            args[name] = default
        elif found:
            found[-1].instructions.append(instruction)
    return args, found


def _regex(pattern: str) -> re.Pattern[str]:
    out, i = "", 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out, i = out + "(.*/)?", i + 3
        elif pattern.startswith("**", i):
            out, i = out + ".*", i + 2
        else:
            out += {"*": "[^/]*", "?": "[^/]"}.get(pattern[i], re.escape(pattern[i]))
            i += 1
    return re.compile(out + r"\Z")


@dataclass(frozen=True)
class IgnoreRule:
    pattern: str
    negated: bool

    def matches(self, path: str) -> bool:
        """Docker's rule: the path or any folder above it matches."""
        parts = path.split("/")
        rx = _regex(self.pattern)
        return any(rx.match("/".join(parts[:n])) for n in range(1, len(parts) + 1))


def ignore_rules(text: str) -> list[IgnoreRule]:
    rules = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        negated = line.startswith("!")
        pattern = os.path.normpath(line.lstrip("!").strip()).lstrip("/")
        rules.append(IgnoreRule(pattern, negated))
    return rules


def in_context(path: str, rules: list[IgnoreRule]) -> bool:
    """The last rule that matches decides."""
    excluded = False
    for rule in rules:
        if rule.matches(path):
            excluded = not rule.negated
    return not excluded


def context_files(root: Path = ROOT) -> list[str]:
    """Every file Docker would send, relative to ``root``."""
    rules = ignore_rules(DOCKERIGNORE.read_text(encoding="utf-8"))
    out = []
    for folder, dirs, files in os.walk(root):
        relative = os.path.relpath(folder, root)
        prefix = "" if relative == "." else relative + "/"
        # a folder left out stays unvisited unless a later "!" rule reaches inside it
        dirs[:] = [d for d in dirs if in_context(prefix + d, rules)
                   or any(r.negated and r.pattern.startswith(prefix + d + "/") for r in rules)]
        out += [prefix + f for f in files if in_context(prefix + f, rules)]
    return sorted(out)
