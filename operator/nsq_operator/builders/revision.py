"""Pod template revisions: one hash per reason a pod must restart (its image, its
configuration, the manual restart token), stamped on the template so that every pod
carries what it was made from and the roller can tell why it is outdated."""
from __future__ import annotations

import copy
import hashlib
import json
from dataclasses import dataclass
from typing import Any, Mapping

from ..constants import CONFIG_REVISION_ANNOTATION, IMAGE_REVISION_ANNOTATION, RESTART_REVISION_ANNOTATION


REVISION_ANNOTATIONS = (IMAGE_REVISION_ANNOTATION, CONFIG_REVISION_ANNOTATION, RESTART_REVISION_ANNOTATION)
# flags a running nsqd is given live (its replication peer list): a change restarts no pod
LIVE_ARGS = ("--replication-peer=", "--replication-membership-epoch=")


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Revision:
    image: str
    config: str
    restart: str

    @property
    def combined(self) -> str:
        return _digest([self.image, self.config, self.restart])

    def annotations(self) -> dict[str, str]:
        return {IMAGE_REVISION_ANNOTATION: self.image, CONFIG_REVISION_ANNOTATION: self.config,
                RESTART_REVISION_ANNOTATION: self.restart}

    @classmethod
    def of(cls, obj: Mapping[str, Any]) -> "Revision | None":
        """The revision a pod or pod template carries; None when it carries none (made by
        an operator from before revisions)."""
        annotations = (obj.get("metadata") or {}).get("annotations") or {}
        parts = [annotations.get(key) for key in (IMAGE_REVISION_ANNOTATION, CONFIG_REVISION_ANNOTATION,
                                                  RESTART_REVISION_ANNOTATION)]
        if any(part is None for part in parts):
            return None
        return cls(*(str(part) for part in parts))


def revision_of(template: Mapping[str, Any], config_values: Mapping[str, Any], restart_token: str) -> Revision:
    """``config_values``: what the pod reads from the ConfigMap and only gets by restarting
    (the lookupd list is not among them: running nsqds are told it live)."""
    spec = copy.deepcopy(dict(template["spec"]))
    images = [container.pop("image", None) for container in spec.get("containers", [])]
    for container in spec.get("containers", []):
        if "args" in container:
            container["args"] = [a for a in container["args"] if not str(a).startswith(LIVE_ARGS)]
    meta = template.get("metadata") or {}
    # the pods' labels and annotations (an override's too) reach running pods only through a restart
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items() if k not in REVISION_ANNOTATIONS}
    return Revision(image=_digest(images), config=_digest({"spec": spec, "labels": meta.get("labels") or {},
                                                           "annotations": annotations, "config": config_values}),
                    restart=_digest(restart_token))


def stamp(template: dict[str, Any], config_values: Mapping[str, Any], restart_token: str) -> dict[str, Any]:
    template["metadata"].setdefault("annotations", {}).update(
        revision_of(template, config_values, restart_token).annotations())
    return template
