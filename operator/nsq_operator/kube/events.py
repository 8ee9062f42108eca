"""Kubernetes Events about an object, with typed reasons (NewRevision, ScaleDown ...),
through kopf's poster: queued and posted in the background with retries, so an Event
that cannot be posted (no right to, an API hiccup) never stops a reconcile or a rolling
upgrade; kopf logs the failure and goes on."""
from __future__ import annotations

from typing import Any, Literal, Mapping

import kopf

EventType = Literal["Normal", "Warning"]
MAX_MESSAGE = 1024


def post_event(involved: Mapping[str, Any], type_: EventType, reason: str, message: str) -> None:
    kopf.event(dict(involved), type=type_, reason=reason, message=message[:MAX_MESSAGE])
