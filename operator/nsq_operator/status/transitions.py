"""The Events a change of conditions deserves: one when an object gets Ready, one when it
becomes Degraded or degraded for another reason, one when it recovers. Retries and
passes that change nothing post none."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

RECOVERED = "Recovered"
READY = "Ready"


@dataclass(frozen=True)
class Announcement:
    type: Literal["Normal", "Warning"]
    reason: str
    message: str


def _get(conditions: list[dict[str, Any]], type_: str) -> dict[str, Any]:
    return next((c for c in conditions if c.get("type") == type_), {})


def transitions(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> list[Announcement]:
    out = []
    was, now = _get(before, "Degraded"), _get(after, "Degraded")
    if now.get("status") == "True" and (was.get("status") != "True" or was.get("reason") != now.get("reason")):
        out.append(Announcement("Warning", str(now.get("reason")), str(now.get("message") or "")))
    elif was.get("status") == "True" and now.get("status") == "False":
        out.append(Announcement("Normal", RECOVERED, f"no longer degraded ({was.get('reason')})"))
    was, now = _get(before, "Ready"), _get(after, "Ready")
    if now.get("status") == "True" and was.get("status") != "True":
        out.append(Announcement("Normal", READY, str(now.get("message") or "")))
    return out
