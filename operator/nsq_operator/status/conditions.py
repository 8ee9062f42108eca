"""Ready / Progressing / Degraded conditions, the Kubernetes way: a transition time that
moves only when the status does."""
from __future__ import annotations

import datetime
from dataclasses import dataclass
from typing import Any, Literal

Status = Literal["True", "False", "Unknown"]


def now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class Verdict:
    """One reconcile's outcome, turned into the three conditions by ``conditions_for``."""
    ready: bool
    progressing: bool
    degraded: bool
    reason: str
    message: str


def set_condition(conditions: list[dict[str, Any]], type_: str, status: Status, reason: str, message: str,
                  generation: int | None, at: str | None = None) -> list[dict[str, Any]]:
    previous = next((c for c in conditions if c.get("type") == type_), None)
    if previous is not None and previous.get("status") == status and previous.get("lastTransitionTime"):
        since = str(previous["lastTransitionTime"])
    else:
        since = at or now()
    entry: dict[str, Any] = {"type": type_, "status": status, "reason": reason, "message": message,
                             "lastTransitionTime": since}
    if generation is not None:
        entry["observedGeneration"] = generation
    return [c for c in conditions if c.get("type") != type_] + [entry]


def conditions_for(previous: list[dict[str, Any]], verdict: Verdict, generation: int | None) -> list[dict[str, Any]]:
    def flag(value: bool) -> Status:
        return "True" if value else "False"
    conditions = list(previous)
    conditions = set_condition(conditions, "Ready", flag(verdict.ready), verdict.reason, verdict.message, generation)
    conditions = set_condition(conditions, "Progressing", flag(verdict.progressing), verdict.reason,
                               verdict.message if verdict.progressing else "", generation)
    conditions = set_condition(conditions, "Degraded", flag(verdict.degraded), verdict.reason,
                               verdict.message if verdict.degraded else "", generation)
    order = {"Ready": 0, "Progressing": 1, "Degraded": 2}
    return sorted(conditions, key=lambda c: order.get(c["type"], 3))


def ready(message: str = "") -> Verdict:
    return Verdict(True, False, False, "Reconciled", message)


def progressing(reason: str, message: str) -> Verdict:
    return Verdict(False, True, False, reason, message)


def degraded(reason: str, message: str) -> Verdict:
    return Verdict(False, False, True, reason, message)
