"""Pieces every CRD model shares: the base class, durations, quantities, conditions."""
from __future__ import annotations

import re
from fractions import Fraction
from typing import Annotated, Any, Callable, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, WithJsonSchema
from pydantic.alias_generators import to_camel

from nsq_protocol.flags import parse_duration

from .. import quantity as quantity_module


class CrdModel(BaseModel):
    """camelCase on the wire (Kubernetes' convention), snake_case in Python."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")

    def wire(self) -> dict[str, Any]:
        return self.model_dump(by_alias=True, mode="json", exclude_none=True)


# -- Go durations, kept as the user wrote them ("60s", "1m30s", "250ms") -----------------
GO_DURATION_PATTERN = r"^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$|^0$"


def _parsable_duration(text: str) -> str:
    parse_duration(text)
    return text


def duration_between(low: float | None = None, high: float | None = None) -> Callable[[str], str]:
    """A validator for bounds that the schema cannot express on a duration string."""
    def check(text: str) -> str:
        seconds = parse_duration(text)
        if low is not None and seconds < low:
            raise ValueError(f"{text} is below the minimum of {low}s")
        if high is not None and seconds > high:
            raise ValueError(f"{text} is above the maximum of {high}s")
        return text
    return check


GoDuration = Annotated[str, Field(pattern=GO_DURATION_PATTERN), AfterValidator(_parsable_duration)]


# -- Kubernetes quantities ("512Mi", "0.5", 2) ----------------------------------------------
QUANTITY_PATTERN = r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
_QUANTITY = re.compile(QUANTITY_PATTERN)


def _quantity(value: Any) -> Any:
    if isinstance(value, bool):
        raise ValueError("a quantity is a number or a string such as 512Mi")
    if isinstance(value, (int, float)):
        value = str(value)
    if isinstance(value, str) and not _QUANTITY.match(value):
        raise ValueError(f"{value!r} is not a Kubernetes quantity")
    return value


def quantity_value(quantity: str | int) -> Fraction:
    """A Kubernetes quantity as an exact number ("10Gi" -> 10737418240), to compare two sizes."""
    return quantity_module.value(quantity)


Quantity = Annotated[
    str,
    BeforeValidator(_quantity),
    # the apiserver admits an int-or-string only as exactly these two branches; the
    # pattern (checked on strings only) sits beside them, never inside
    WithJsonSchema({"anyOf": [{"type": "integer"}, {"type": "string"}], "pattern": QUANTITY_PATTERN,
                    "x-kubernetes-int-or-string": True}),
]


def passthrough(description: str) -> dict[str, Any]:
    """Schema of a field handed to Kubernetes as is (affinity, tolerations ...): Kubernetes
    validates it when the StatefulSet is written."""
    return {"type": "object", "x-kubernetes-preserve-unknown-fields": True, "description": description}


class ResourceRequirements(CrdModel):
    requests: dict[str, Quantity] = Field(default_factory=dict, description="minimum resources, e.g. cpu: 100m, memory: 128Mi")
    limits: dict[str, Quantity] = Field(default_factory=dict, description="maximum resources, e.g. memory: 512Mi")


DeletionPolicy = Literal["Retain", "Delete"]


# -- status ----------------------------------------------------------------------------------
ConditionType = Literal["Ready", "Progressing", "Degraded"]


class Condition(CrdModel):
    type: str = Field(description="Ready, Progressing or Degraded")
    status: Literal["True", "False", "Unknown"] = Field(description="True, False or Unknown")
    reason: str = Field(description="one CamelCase word for machines")
    message: str = Field("", description="a sentence for people")
    last_transition_time: str = Field(description="when status last changed (RFC 3339)")
    observed_generation: int | None = Field(None, description="the generation this condition was computed from")


class StatusBase(CrdModel):
    observed_generation: int | None = Field(None, description="the metadata.generation last reconciled")
    conditions: list[Condition] = Field(default_factory=list, description="Ready, Progressing and Degraded")
