"""A pod template override, in the manner of Strimzi's ``template`` and RabbitMQ's
``override``: what the operator generates stays the base, the user's partial pod
template is merged into it the way Kubernetes merges a strategic merge patch."""
from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator, model_validator

from ..strategic_merge import OverrideError, merge_pod_template
from .common import CrdModel, passthrough

# the labels a StatefulSet selects its pods by: changing them would orphan the pods
SELECTOR_LABELS = ("app.kubernetes.io/name", "app.kubernetes.io/instance", "app.kubernetes.io/component",
                   "app.kubernetes.io/managed-by")  # and the operator watches its pods by this one


class PodMetadataOverride(CrdModel):
    labels: dict[str, str] = Field(default_factory=dict, description="labels added to every pod")
    annotations: dict[str, str] = Field(default_factory=dict, description="annotations added to every pod")

    @field_validator("labels")
    @classmethod
    def _selector_kept(cls, labels: dict[str, str]) -> dict[str, str]:
        taken = sorted(set(labels) & set(SELECTOR_LABELS))
        if taken:
            raise ValueError(f"{', '.join(taken)} are the operator's: its StatefulSets select their pods by them, "
                             f"and it watches them by them")
        return labels


class PodTemplateOverride(CrdModel):
    metadata: PodMetadataOverride = Field(default_factory=PodMetadataOverride,
                                          description="labels and annotations added to every pod")
    spec: dict[str, Any] = Field(
        default_factory=dict,
        json_schema_extra=passthrough(
            "core/v1 PodSpec fields merged into the generated pod spec as a strategic merge patch would be: "
            "maps merge, null removes a field, containers, volumes, env, volumeMounts ... merge by name (an item "
            "with '$patch: delete' removes its match), other lists are replaced. Extra containers must meet the "
            "namespace's Pod Security level themselves (the generated ones meet 'restricted')"))

    @model_validator(mode="after")
    def _mergeable(self) -> "PodTemplateOverride":
        try:
            merge_pod_template({"metadata": {}, "spec": {}}, self.wire())
        except OverrideError as e:
            raise ValueError(str(e)) from None
        return self

    def wire(self) -> dict[str, Any]:
        return self.model_dump(by_alias=True, mode="json", exclude_none=False)
