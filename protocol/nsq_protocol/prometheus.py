"""Prometheus' text exposition format (version 0.0.4), written by hand: families of
gauges, counters and summaries, each with HELP and TYPE lines, label values escaped.
Both servers expose their numbers with it at /metrics."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

Labels = dict[str, str]


def escape_label(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def format_labels(labels: Labels) -> str:
    if not labels:
        return ""
    return "{" + ",".join(f'{k}="{escape_label(v)}"' for k, v in labels.items()) + "}"


def format_value(value: float) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int) or float(value).is_integer():
        return str(int(value))
    return repr(float(value))


@dataclass
class Family:
    name: str
    kind: str  # gauge, counter, summary
    help: str
    samples: list[tuple[str, Labels, float]] = field(default_factory=list)

    def add(self, labels: Labels, value: float, suffix: str = "") -> None:
        self.samples.append((self.name + suffix, labels, value))

    def render(self) -> list[str]:
        lines = [f"# HELP {self.name} {self.help}", f"# TYPE {self.name} {self.kind}"]
        lines += [f"{name}{format_labels(labels)} {format_value(value)}" for name, labels, value in self.samples]
        return lines


class Exposition:
    """Families in the order first declared; samples added as the stats are walked."""

    def __init__(self) -> None:
        self.families: dict[str, Family] = {}

    def family(self, name: str, kind: str, help: str) -> Family:
        if name not in self.families:
            self.families[name] = Family(name, kind, help)
        return self.families[name]

    def gauge(self, name: str, help: str, labels: Labels, value: float) -> None:
        self.family(name, "gauge", help).add(labels, value)

    def counter(self, name: str, help: str, labels: Labels, value: float) -> None:
        self.family(name, "counter", help).add(labels, value)

    def latency(self, name: str, help: str, labels: Labels, e2e: dict[str, Any]) -> None:
        """A summary of nanosecond percentiles, in seconds; nothing when not tracked."""
        percentiles = e2e.get("percentiles")
        if percentiles is None:
            return
        summary = self.family(name, "summary", help)
        for p in percentiles:
            summary.add({**labels, "quantile": format_value(p["quantile"])}, p["value"] / 1e9)
        summary.add(labels, e2e.get("count", 0), "_count")

    def render(self) -> str:
        lines: list[str] = []
        for family in self.families.values():
            lines += family.render()
        return "\n".join(lines) + "\n"
