"""What keeps a cluster from getting Ready by itself, found in the objects: containers
that cannot run, pods no node takes, pods the API server refuses to create, and writes of
the operator it refuses. Each is a Degraded reason; waiting for pods that are merely
starting is not."""
from __future__ import annotations

import datetime
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from ..kube.client import KubeApi
from ..kube.pods import failing, unschedulable
from ..status import conditions


@dataclass(frozen=True)
class Problem:
    reason: str  # one CamelCase word: the Degraded condition's reason
    message: str
    waiting: bool = False  # not a fault: what the pass waits for before it can go on (Progressing)


def _parse(stamp: str) -> datetime.datetime | None:
    try:
        return datetime.datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.timezone.utc)
    except ValueError:
        return None


def pod_problems(pods: Iterable[Mapping[str, Any]], at: datetime.datetime, unschedulable_after: float,
                 spared: str | None = None) -> list[Problem]:
    """``spared``: the pod the roller is replacing (its container may exit on purpose)."""
    found = []
    for pod in pods:
        name = pod["metadata"]["name"]
        if pod["metadata"].get("deletionTimestamp") or name == spared:
            continue
        if (failure := failing(pod)) is not None:
            reason, detail = failure
            found.append(Problem(reason, f"{name} cannot run: {reason}" + (f" ({detail})" if detail else "")))
        elif (pending := unschedulable(pod)) is not None:
            since, detail = pending
            began = _parse(since)
            if began is not None and (at - began).total_seconds() > unschedulable_after:
                found.append(Problem("Unschedulable", f"{name} found no node for {int((at - began).total_seconds())}s"
                                     + (f": {detail}" if detail else "")))
    return found


async def creation_refused(api: KubeApi, namespace: str, statefulsets: Iterable[str], at: datetime.datetime,
                           window: float) -> list[Problem]:
    """The StatefulSet controller's recent FailedCreate events (Pod Security, quota ...):
    read only when pods are missing, so a healthy cluster costs no request for them."""
    wanted = set(statefulsets)
    found: dict[str, Problem] = {}
    for event in await api.list("Event", namespace):
        involved = event.get("involvedObject") or {}
        if event.get("reason") != "FailedCreate" or involved.get("kind") != "StatefulSet" or involved.get("name") not in wanted:
            continue
        when = _parse(str(event.get("lastTimestamp") or event.get("firstTimestamp") or ""))
        if when is None or (at - when).total_seconds() > window:
            continue
        found[involved["name"]] = Problem("FailedCreate", f"StatefulSet {involved['name']}: {event.get('message', '')}")
    return [found[name] for name in sorted(found)]


def verdict(problems: list[Problem], otherwise: conditions.Verdict) -> conditions.Verdict:
    """Degraded by the first problem, naming every one, then what the pass saw."""
    if not problems:
        return otherwise
    return conditions.degraded(problems[0].reason, "; ".join([*(p.message for p in problems), otherwise.message]))
