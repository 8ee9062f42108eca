"""Where the copies of replicated topics stand, from every nsqd's GET /replication: pure.

An nsqd owns the messages published to it and copies them to the next nsqds of the
peer list (its backups). Its answer names each backup with its connection, the frames it
has not acknowledged yet (``lag_frames``) and the frames the owner had to drop from its
resend buffer while that backup was away (``missed_frames``), and says which peers it
hears from (``alive``). A backup is

- *in sync*: connected, nothing dropped, at most ``IN_SYNC_LAG_FRAMES`` frames not yet
  acknowledged (frames in transit under load);
- *catching up*: connected, nothing dropped, more frames than that to acknowledge (the
  resend after a reconnect);
- *behind*: connected, but frames were dropped for it: it lacks some older copies (the
  owner still holds those messages);
- *missing*: not connected.

The owner's own copy is in sync while it answers and missing when it does not."""
from __future__ import annotations

from typing import Any, Iterable, Mapping

from ..models import OwnerCopies, ReplicationStatus

IN_SYNC_LAG_FRAMES = 64
IN_SYNC, CATCHING_UP, BEHIND, MISSING = "in_sync", "catching_up", "behind", "missing"
Reports = Mapping[str, "Mapping[str, Any] | None"]  # pod -> its GET /replication, None when it did not answer


def backup_state(entry: Mapping[str, Any]) -> str:
    if not entry.get("connected"):
        return MISSING
    if int(entry.get("missed_frames") or 0) > 0:
        return BEHIND
    if int(entry.get("lag_frames") or 0) > IN_SYNC_LAG_FRAMES:
        return CATCHING_UP
    return IN_SYNC


def owner_copies(pod: str, report: Mapping[str, Any] | None, pod_of: Mapping[str, str],
                 topic_copies: int | None = None) -> OwnerCopies:
    """``pod_of``: replication address -> pod name (an address no pod has stays as it is).
    ``topic_copies``: a topic's own count: its copies are on the first ``topic_copies - 1``
    backups the nsqd lists (in ring order); otherwise every backup it lists counts."""
    if report is None:
        return OwnerCopies(pod=pod, missing=[pod])
    found: dict[str, list[str]] = {IN_SYNC: [pod], CATCHING_UP: [], BEHIND: [], MISSING: []}
    backups = list(report.get("backups") or [])
    if topic_copies is not None:
        backups = backups[:topic_copies - 1]
    for entry in backups:
        found[backup_state(entry)].append(pod_of.get(str(entry.get("peer")), str(entry.get("peer"))))
    return OwnerCopies(pod=pod, in_sync=found[IN_SYNC], catching_up=found[CATCHING_UP], behind=found[BEHIND],
                       missing=found[MISSING])


def summarize(replicas: int, owners: Iterable[str], reports: Reports, pod_of: Mapping[str, str],
              topic_copies: int | None = None) -> ReplicationStatus:
    rows = [owner_copies(pod, reports.get(pod), pod_of, topic_copies) for pod in owners]
    return ReplicationStatus(replicas=replicas, owners=rows,
                             in_sync=sum(len(r.in_sync) for r in rows),
                             catching_up=sum(len(r.catching_up) for r in rows),
                             behind=sum(len(r.behind) for r in rows),
                             missing=sum(len(r.missing) for r in rows))


def unsettled(status: ReplicationStatus) -> str | None:
    """Why copies are not all in place (missing or catching up), for a condition's message;
    None when every copy is in sync or merely behind."""
    parts = []
    for row in status.owners:
        if row.missing == [row.pod]:
            parts.append(f"{row.pod} does not answer")
            continue
        if row.missing:
            parts.append(f"copies of {row.pod} missing on {', '.join(row.missing)}")
        if row.catching_up:
            parts.append(f"copies of {row.pod} catching up on {', '.join(row.catching_up)}")
    return "; ".join(parts) or None


def not_heard(reports: Reports, pod_of: Mapping[str, str]) -> list[str]:
    """Pods some answering nsqd does not hear from (it would adopt their messages)."""
    lost = set()
    for report in reports.values():
        for peer in (report or {}).get("peers") or []:
            if not peer.get("alive"):
                lost.add(pod_of.get(str(peer.get("peer")), str(peer.get("peer"))))
    return sorted(lost)


def all_in_place(status: ReplicationStatus, reports: Reports, pod_of: Mapping[str, str]) -> str | None:
    """What a roll waits for before it takes an nsqd down, or after it brought one back:
    None when every nsqd answers, hears from every peer, and every copy is connected and
    caught up; otherwise why not."""
    reasons = []
    if (why := unsettled(status)) is not None:
        reasons.append(why)
    if lost := not_heard(reports, pod_of):
        reasons.append(f"{', '.join(lost)} not heard from by every peer")
    return "; ".join(reasons) or None
