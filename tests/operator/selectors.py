"""Kubernetes label selectors in their string form (``a=b,c!=d,e,!f,g in (x,y),h notin (z)``),
matched as the API server matches them: the emulator filters lists and watches by them."""
from __future__ import annotations

import re
from typing import Mapping

_SET = re.compile(r"^\s*([^\s!=]+)\s+(in|notin)\s+\(([^)]*)\)\s*$")


def _terms(selector: str) -> list[str]:
    """Split on commas outside parentheses."""
    terms, depth, current = [], 0, ""
    for char in selector:
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            terms.append(current)
            current = ""
        else:
            current += char
    return [t.strip() for t in [*terms, current] if t.strip()]


def matches(selector: str, labels: Mapping[str, str]) -> bool:
    for term in _terms(selector):
        if found := _SET.match(term):
            key, op, values = found.group(1), found.group(2), {v.strip() for v in found.group(3).split(",")}
            if (op == "in") != (labels.get(key) in values) or (op == "notin" and key in labels and labels[key] in values):
                return False
        elif "!=" in term:
            key, value = (s.strip() for s in term.split("!=", 1))
            if labels.get(key) == value:
                return False
        elif "=" in term:
            key, value = (s.strip() for s in term.replace("==", "=").split("=", 1))
            if labels.get(key) != value:
                return False
        elif term.startswith("!"):
            if term[1:].strip() in labels:
                return False
        elif term not in labels:
            return False
    return True
