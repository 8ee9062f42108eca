"""Objects of other projects' custom resources (cert-manager's Certificate, the Prometheus
Operator's PodMonitor and PrometheusRule, KEDA's ScaledObject) checked against models
generated from those projects' CRDs (PyPI cloudcoil-models-*). A model keeps only the
fields the CRD declares, so a manifest equal to its own validated round trip has no field
the API server would prune, and each value has the CRD's type."""
from __future__ import annotations

import functools
import importlib
from typing import Any

MODELS = {
    ("cert-manager.io/v1", "Certificate"): "cloudcoil.models.cert_manager.v1",
    ("cert-manager.io/v1", "Issuer"): "cloudcoil.models.cert_manager.v1",
    ("cert-manager.io/v1", "ClusterIssuer"): "cloudcoil.models.cert_manager.v1",
    ("monitoring.coreos.com/v1", "PodMonitor"): "cloudcoil.models.prometheus_operator.v1",
    ("monitoring.coreos.com/v1", "PrometheusRule"): "cloudcoil.models.prometheus_operator.v1",
    ("keda.sh/v1alpha1", "ScaledObject"): "cloudcoil.models.keda.v1alpha1",
}


def is_custom(manifest: dict[str, Any]) -> bool:
    return (manifest.get("apiVersion"), manifest.get("kind")) in MODELS


@functools.cache
def _model(api_version: str, kind: str) -> Any:
    return getattr(importlib.import_module(MODELS[api_version, kind]), kind)


def _drop_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _drop_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_drop_nulls(v) for v in value]
    return value


def validate(manifest: dict[str, Any]) -> None:
    """Raises pydantic's ValidationError for a wrong type, AssertionError for a field the
    CRD does not have."""
    model = _model(manifest["apiVersion"], manifest["kind"])
    kept = _drop_nulls(model.model_validate(manifest).model_dump(by_alias=True, exclude_unset=True, mode="json"))
    assert kept == manifest, f"{manifest['kind']} {manifest['metadata'].get('name')}: fields its CRD does not " \
                             f"have (or of another shape): {_difference(manifest, kept)}"


def _difference(sent: Any, kept: Any, path: str = "") -> list[str]:
    if isinstance(sent, dict) and isinstance(kept, dict):
        return [d for k in sent for d in _difference(sent[k], kept.get(k), f"{path}.{k}")]
    if isinstance(sent, list) and isinstance(kept, list) and len(sent) == len(kept):
        return [d for i, (s, k) in enumerate(zip(sent, kept)) for d in _difference(s, k, f"{path}[{i}]")]
    return [] if sent == kept else [path or "."]
