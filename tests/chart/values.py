"""Values the chart tests render with, besides the defaults."""
from __future__ import annotations

from typing import Any

from tests.chart.render import NAMESPACE

# Everything a user is most likely to change, at once.
CUSTOM: dict[str, Any] = {
    "image": {"repository": "registry.example.com/nsq/nsq-operator", "tag": "1.2.3", "pullPolicy": "Always"},
    "imagePullSecrets": [{"name": "registry-login"}],
    "watchNamespaces": [NAMESPACE, "team-a"],
    "logLevel": "debug",
    "intervals": {"status": 30, "drift": 2.5},
    "livenessPort": 9090,
    "resources": {"requests": {"cpu": "200m", "memory": "256Mi"}, "limits": {"cpu": "1", "memory": "512Mi"}},
    "serviceAccount": {"annotations": {"example.com/role": "nsq-operator"}},
    "podAnnotations": {"example.com/scrape": "false"},
    "podLabels": {"team": "messaging"},
    "nodeSelector": {"kubernetes.io/os": "linux"},
    "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "nsq", "effect": "NoSchedule"}],
    "priorityClassName": "system-cluster-critical",
    "exampleCluster": {
        "enabled": True,
        "name": "demo",
        "spec": {"nsqd": {"replicas": 2, "options": {"mem-queue-size": 0, "sync-every": 1}},
                 "drainTimeoutSeconds": 90},
        "topics": [{"name": "Orders_v1", "channels": ["billing", "archive#ephemeral"]},
                   {"name": "clicks"}],
    },
}
