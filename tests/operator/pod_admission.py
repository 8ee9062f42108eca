"""Admission the emulator adds to KMock: Pod Security "restricted" enforced on the pods
of the namespaces the test cluster labels for it, with the API server's answer (403
Forbidden naming the violations), so a StatefulSet whose template breaks it gets no pods."""
from __future__ import annotations

from typing import Any, Mapping

import kmock

from tests.operator.pod_security import manifest_violations

RESTRICTED = "restricted:latest"


def admit_pod(pod: Mapping[str, Any]) -> None:
    problems = manifest_violations({**pod, "kind": "Pod"})
    if problems:
        name = (pod.get("metadata") or {}).get("name")
        raise kmock.KubernetesError(status=403, reason="Forbidden",
                                    message=f'pods "{name}" is forbidden: violates PodSecurity "{RESTRICTED}": '
                                            + "; ".join(problems))
