"""The chart's optional monitoring: the alert rules pass Prometheus' own checks (promtool
check rules) and its unit tests (promtool test rules: tests/chart/monitoring), the
PrometheusRule, dashboard ConfigMap and operator PodMonitor render valid and carry the
shipped files unchanged, and every metric the dashboard and the rules query is one that
our nsqd or the operator really exposes (read from real /metrics: an nsqd with topics,
channels, consumers, latency percentiles and a scale-down drain under way)."""
from __future__ import annotations

import datetime
import json
import re
import shutil
import subprocess
import urllib.request
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from nsq_operator import metrics as operator_metrics
from tests import custom_kinds
from tests.broker.wire import WireConn
from tests.chart.render import CHART, Helm, of_kind, one
from tests.promtool import promtool_problems
from tests.servers import BIN, wait_for

MONITORING = CHART / "monitoring"
RULES = MONITORING / "nsq-alerts.yaml"
DASHBOARD = MONITORING / "nsq-dashboard.json"
RULE_TESTS = Path(__file__).with_name("monitoring") / "nsq-alerts.test.yaml"
ENABLED = {"monitoring": {"podMonitor": {"enabled": True, "labels": {"release": "prometheus"}},
                          "prometheusRule": {"enabled": True, "labels": {"release": "prometheus"}},
                          "grafanaDashboard": {"enabled": True}}}


def promtool(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    binary = shutil.which("promtool") or shutil.which("promtool", path=str(BIN))
    if binary is None:
        pytest.skip("no promtool on PATH or in the venv (make test fetches it from Debian's prometheus package)")
    return subprocess.run([binary, *args], capture_output=True, text=True, timeout=60, cwd=cwd)


def test_promtool_checks_the_rules() -> None:
    done = promtool("check", "rules", str(RULES))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS: 5 rules found" in done.stdout


def test_the_alerts_fire_as_their_unit_tests_say() -> None:
    done = promtool("test", "rules", RULE_TESTS.name, cwd=RULE_TESTS.parent)
    assert done.returncode == 0, done.stdout + done.stderr
    tested = {t["alertname"] for group in yaml.safe_load(RULE_TESTS.read_text())["tests"]
              for t in group["alert_rule_test"]}
    assert tested == {r["alert"] for r in yaml.safe_load(RULES.read_text())["groups"][0]["rules"]}


def test_the_monitoring_objects_render_valid_with_the_shipped_files(helm: Helm) -> None:
    assert helm.lint(ENABLED).returncode == 0
    objects = helm.template(ENABLED)
    rule = one(objects, "PrometheusRule")
    custom_kinds.validate(rule)
    assert rule["spec"] == yaml.safe_load(RULES.read_text())
    assert rule["metadata"]["labels"]["release"] == "prometheus"
    dashboard = next(o for o in of_kind(objects, "ConfigMap") if o["metadata"]["name"].endswith("-dashboard"))
    kubernetes_validate.validate(dashboard, "1.33.0", strict=True)
    assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(dashboard["data"]["nsq-dashboard.json"]) == json.loads(DASHBOARD.read_text())
    monitor = one(objects, "PodMonitor")
    custom_kinds.validate(monitor)
    container = one(objects, "Deployment")["spec"]["template"]["spec"]["containers"][0]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert monitor["spec"]["podMetricsEndpoints"][0]["port"] == "metrics"
    assert f"--metrics-address=0.0.0.0:{ports['metrics']}" in container["args"]
    default = helm.template()
    assert not [o for o in default if o["kind"] in ("PrometheusRule", "PodMonitor")]
    assert not [o for o in of_kind(default, "ConfigMap") if o["metadata"]["name"].endswith("-dashboard")]


# -- which metrics a PromQL expression reads --------------------------------------------------
KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless", "bool",
            "offset", "inf", "nan"}


def metric_names(expr: str) -> set[str]:
    """The metric names in a PromQL expression: identifiers that are neither functions,
    aggregations, keywords, label names (in {...} or by/on (...)) nor durations."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)  # strings
    text = re.sub(r"\{[^}]*\}", " ", text)  # label matchers
    text = re.sub(r"\[[^\]]*\]", " ", text)  # ranges
    text = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", text)
    text = re.sub(r"\b\d+(\.\d+)?([eE][+-]?\d+)?[a-z]*\b", " ", text)  # numbers and durations (offset 5m)
    names = set()
    for match in re.finditer(r"[a-zA-Z_:][a-zA-Z0-9_:]*", text):
        rest = text[match.end():].lstrip()
        if rest.startswith("(") or match.group() in KEYWORDS:
            continue
        names.add(match.group())
    return names


def test_metric_names_are_read_out_of_promql() -> None:
    assert metric_names('sum by (topic, channel) (rate(nsq_channel_messages_total{namespace=~"$ns"}[5m]))') == \
        {"nsq_channel_messages_total"}
    assert metric_names('nsq_ready == 0 and nsq_draining == 0') == {"nsq_ready", "nsq_draining"}
    assert metric_names('max by (a) (x{quantile="0.99"}) > 9e2 unless on (pod) up offset 5m') == {"x", "up"}


def queried() -> dict[str, set[str]]:
    """Metric name -> where it is queried (dashboard panel or alert)."""
    found: dict[str, set[str]] = {}
    dashboard = json.loads(DASHBOARD.read_text())
    queries: list[tuple[str, str]] = [(f"panel {p['title']!r}", t["expr"]) for p in dashboard["panels"]
                                      for t in p["targets"]]
    variables = [(f"variable {v['name']}", v["definition"]) for v in dashboard["templating"]["list"]
                 if v["type"] == "query"]
    queries += [(where, re.sub(r"^label_values\((.*),\s*\w+\)$", r"\1", expr)) for where, expr in variables]
    queries += [(f"alert {r['alert']}", r["expr"]) for g in yaml.safe_load(RULES.read_text())["groups"]
                for r in g["rules"]]
    for where, expr in queries:
        for name in metric_names(expr):
            found.setdefault(name, set()).add(where)
    return found


def sample_names(text: str) -> set[str]:
    return {s.name for family in text_string_to_metric_families(text) for s in family.samples}


def nsqd_exposes(servers: Any) -> set[str]:
    """Every sample name of a real nsqd's /metrics with all it can show: topics, channels,
    consumers, e2e latency percentiles, and a scale-down drain under way."""
    target = servers.nsqd()
    nsqd = servers.nsqd(e2e_processing_latency_percentile=["0.99"], drain_timeout="30s")
    consumer, producer = WireConn(nsqd.tcp_address), WireConn(nsqd.tcp_address)
    try:
        consumer.sub("orders", "billing")
        consumer.expect_ok()
        producer.mpub("orders", [b"one", b"two"])
        producer.expect_ok()
        consumer.rdy(1)
        held = consumer.read_message()
        consumer.fin(held.id)
        consumer.rdy(1)
        consumer.read_message()  # held in flight: the drain waits for it
        wait_for(lambda: nsqd.channel("orders", "billing")["in_flight_count"] == 1, 5)
        assert nsqd.post(f"/drain?handoff={target.http_address}").status == 200
        wait_for(lambda: nsqd.get_json("/drain")["handoff"] is not None, 5, message="the handoff under way")
        with urllib.request.urlopen(nsqd.url("/metrics"), timeout=10) as answer:
            return sample_names(answer.read().decode())
    finally:
        consumer.close()
        producer.close()


class _Rolling:
    """A runtime whose kopf index holds one cluster three minutes into a roll's phase."""

    def __init__(self) -> None:
        since = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(minutes=3)
        self.rollout_index = {
            ("shop", "nsq"): [{"phase": "Draining", "pod": "nsq-nsqd-2", "failures": 1,
                               "since": since.strftime("%Y-%m-%dT%H:%M:%SZ")}],
            ("shop", "idle"): [{}]}


def operator_exposes() -> set[str]:
    text = generate_latest(operator_metrics.registry(operator_metrics.RolloutCollector(_Rolling()))).decode()
    assert promtool_problems(text) == ""
    return sample_names(text)


def test_the_operator_metrics_say_where_each_roll_stands() -> None:
    text = generate_latest(operator_metrics.registry(operator_metrics.RolloutCollector(_Rolling()))).decode()
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for family in text_string_to_metric_families(text) for s in family.samples}
    labels = (("cluster", "nsq"), ("namespace", "shop"), ("phase", "Draining"))
    assert samples[("nsq_operator_clusters", ())] == 2
    assert samples[("nsq_operator_rollout_in_progress", labels)] == 1
    assert 170 < samples[("nsq_operator_rollout_phase_seconds", labels)] < 400
    assert samples[("nsq_operator_rollout_failures", (("cluster", "nsq"), ("namespace", "shop")))] == 1
    assert not [key for key in samples if ("cluster", "idle") in key[1]]  # no roll under way: no series


def test_every_metric_the_dashboard_and_the_alerts_query_is_exposed(servers: Any) -> None:
    exposed = nsqd_exposes(servers) | operator_exposes()
    wanted = queried()
    missing = {name: sorted(where) for name, where in wanted.items() if name not in exposed}
    assert missing == {}, f"queried but exposed by nothing: {missing}"
    assert {"nsq_ready", "nsq_drain_in_flight", "nsq_handoff_messages_left", "nsq_operator_rollout_phase_seconds",
            "nsq_channel_e2e_processing_latency_seconds"} <= set(wanted)  # the test covers what it claims
