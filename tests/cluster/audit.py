"""What a service account sent the apiserver, read from the audit log the cluster keeps for
every service account outside kube-system (e2e/cluster/up.sh): verb, resource and namespace,
so a test that counts an operator's requests can say which they were when it fails."""
from __future__ import annotations

import json
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path

from tests.cluster.kube import STATE_DIR

AUDIT_LOG = STATE_DIR / "logs" / "audit.log"


def service_account_user(namespace: str, name: str) -> str:
    return f"system:serviceaccount:{namespace}:{name}"


def _received(event: dict) -> datetime:
    return datetime.fromisoformat(event["requestReceivedTimestamp"].replace("Z", "+00:00"))


def requests_of(user: str, since: datetime, until: datetime, log: Path = AUDIT_LOG) -> Counter[str]:
    """``"<verb> <resource or path> [<namespace>]"`` -> requests the user sent in [since, until)."""
    counted: Counter[str] = Counter()
    seen: set[str] = set()
    if not log.exists():
        return counted
    with log.open() as lines:
        for line in lines:
            event = json.loads(line)
            # a watch has a record when its response starts and another when it ends
            if event["user"].get("username") != user or event["auditID"] in seen:
                continue
            seen.add(event["auditID"])
            if not since <= _received(event) < until:
                continue
            target = event.get("objectRef") or {}
            what = target.get("resource") or event["requestURI"].split("?", 1)[0]
            where = f" {target['namespace']}" if target.get("namespace") else ""
            counted[f"{event['verb']} {what}{where}"] += 1
    return counted


def now() -> datetime:
    return datetime.now(timezone.utc)


def summary(counted: Counter[str], most: int = 15) -> str:
    if not counted:
        return f"none in {AUDIT_LOG}"
    return "; ".join(f"{n}x {what}" for what, n in counted.most_common(most))
