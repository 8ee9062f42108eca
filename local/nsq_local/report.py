"""The demo's report: what was published, acknowledged and delivered per channel, what was
lost (must be 0) and duplicated, how long each node's drain took (or, for a scale-down,
how much each node handed off and how long that took), and throughput per phase;
rendered as plain text."""
from __future__ import annotations

from dataclasses import dataclass, field

from .ledger import Tally
from .rolling import NodeRestart
from .scaling import NodeScaleDown


@dataclass
class Report:
    tally: Tally
    restarts: list[NodeRestart]
    nsqds: int
    lookupds: int
    all_delivered: bool            # every acknowledged message reached every channel in time
    errors: list[str] = field(default_factory=list)
    seconds: float = 0.0
    node_names: dict[str, str] = field(default_factory=dict)  # nsqd TCP address -> name
    scale_downs: list[NodeScaleDown] = field(default_factory=list)
    planned_scale_downs: int = 0   # 0: the run was a rolling restart of every nsqd

    @property
    def ok(self) -> bool:
        if self.planned_scale_downs:
            steps_done = len(self.scale_downs) == self.planned_scale_downs and all(s.clean for s in self.scale_downs)
        else:
            steps_done = len(self.restarts) == self.nsqds and all(r.clean for r in self.restarts)
        return self.tally.lost == 0 and self.tally.acknowledged > 0 and not self.errors and steps_done


def _table(headers: list[str], rows: list[list[str]], text_columns: int) -> list[str]:
    """Columns aligned; the first ``text_columns`` to the left, numbers to the right."""
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]

    def line(cells: list[str]) -> str:
        return "  ".join(c.ljust(w) if i < text_columns else c.rjust(w)
                         for i, (c, w) in enumerate(zip(cells, widths))).rstrip()
    return [line(headers)] + [line(r) for r in rows]


def render(report: Report) -> str:
    t = report.tally
    what = (f"Scale-down of {report.planned_scale_downs} of {report.nsqds} nsqds" if report.planned_scale_downs
            else f"Rolling restart of {report.nsqds} nsqds")
    out = [f"{what} (with {report.lookupds} nsqlookupds) under load in {report.seconds:.1f}s", ""]
    out.append(f"published     {t.published}")
    out.append(f"acknowledged  {t.acknowledged}   (publishes failed on every nsqd: {t.failed})")
    out.append(f"delivered     {t.delivered}   (distinct messages, summed over channels)")
    out.append(f"lost          {t.lost}")
    out.append(f"duplicates    {t.duplicates}")
    out.append("")
    out += _table(["topic", "channel", "acknowledged", "delivered", "lost", "duplicates", "failed-but-delivered"],
                  [[c.topic, c.channel, str(c.acknowledged), str(c.delivered), str(c.lost), str(c.duplicates),
                    str(c.failed_but_delivered)] for c in t.channels], text_columns=2)
    if t.unknown:
        out.append(f"bodies with an ID this run never published: {t.unknown}")
    out.append("")
    if report.planned_scale_downs:
        out += _table(["node", "handed off to", "held at drain", "handed off", "topics", "handoff time",
                       "stop time", "exit code"],
                      [[s.name, ",".join(s.targets), str(s.held), str(s.handed_off), str(s.topics),
                        f"{s.handoff_seconds:.2f}s", f"{s.stop_seconds:.2f}s", _exit(s.exit_code)]
                       for s in report.scale_downs], text_columns=2)
    else:
        out += _table(["node", "drained by", "held at drain", "drain time", "back after", "exit code"],
                      [[r.name, r.drained_by, str(r.held), f"{r.drain_seconds:.2f}s", f"{r.back_seconds:.2f}s",
                        _exit(r.exit_code)] for r in report.restarts], text_columns=2)
    out.append("")
    out += _table(["phase", "seconds", "published/s", "delivered/s"],
                  [[p.name, f"{p.seconds:.1f}", f"{p.published_per_second:.0f}",
                    f"{p.delivered_per_second:.0f}"] for p in t.phases], text_columns=1)
    out.append("")
    out += _deliveries_by_node(report)
    out.append("")
    for error in report.errors:
        out.append(f"error: {error}")
    if not report.all_delivered:
        out.append("some acknowledged messages were not delivered before the deadline")
    out.append(f"{'OK' if report.ok else 'FAILED'}: {t.lost} acknowledged messages lost, "
               f"{t.duplicates} duplicates delivered")
    return "\n".join(out)


def _exit(code: int | None) -> str:
    return str(code) if code is not None else "killed"


def _deliveries_by_node(report: Report) -> list[str]:
    """Messages each nsqd delivered in each phase: traffic leaves a node while it is
    drained and comes back once it is restarted."""
    by_phase = report.tally.deliveries_by_node
    phases = [p.name for p in report.tally.phases]
    addresses = sorted({a for counts in by_phase.values() for a in counts},
                       key=lambda a: report.node_names.get(a, a))
    rows = [[report.node_names.get(a, a)] + [str(by_phase[p][a] if p in by_phase else 0) for p in phases]
            for a in addresses]
    return _table(["delivered by"] + phases, rows, text_columns=1)
