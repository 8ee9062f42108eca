"""nsqd can always read the config file the operator writes: any option value an
NsqCluster admits goes through the ConfigMap into nsqd's own config loader unchanged, and
the configuration hash follows the values, not the writer's text."""
from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, assume, given, settings, strategies as st
from pydantic import ValidationError

from nsq_operator.builders.configmap import build_configmap, nsqd_tunables, options_hash
from nsq_operator.constants import NSQD_CONFIG_FILE
from nsq_operator.models import NsqCluster
from nsq_protocol.flags import parse_duration
from nsq_protocol.logfmt import normalize_level
from nsqd.cli import load_options
from nsqd.options import NsqdOptions

UNITS = ["ns", "us", "ms", "s", "m", "h"]
DURATIONS = st.one_of(
    st.just("0"),
    st.lists(st.tuples(st.integers(0, 999), st.sampled_from(UNITS)), min_size=1, max_size=3).map(
        lambda parts: "".join(f"{n}{unit}" for n, unit in parts)),
    st.tuples(st.integers(0, 99), st.integers(0, 999), st.sampled_from(UNITS)).map(lambda p: f"{p[0]}.{p[1]}{p[2]}"))
DURATION_OPTIONS = ["sync-timeout", "msg-timeout", "max-msg-timeout", "max-req-timeout", "client-timeout",
                    "max-heartbeat-interval", "max-output-buffer-timeout", "min-output-buffer-timeout",
                    "output-buffer-timeout", "e2e-processing-latency-window-time", "busy-poll-window"]
INT_OPTIONS = {"mem-queue-size": 0, "sync-every": 1, "max-bytes-per-file": 1024, "max-msg-size": 1, "max-body-size": 1,
               "max-rdy-count": 1, "max-output-buffer-size": 64, "max-channel-consumers": 0, "max-deflate-level": 1}
OPTIONS = st.fixed_dictionaries({}, optional={
    **{name: DURATIONS for name in DURATION_OPTIONS},
    **{name: st.integers(low, 2**40) for name, low in INT_OPTIONS.items()},
    "deflate": st.booleans(), "snappy": st.booleans(),
    "log-level": st.sampled_from(["debug", "info", "warn", "error", "fatal"]),
    "e2e-processing-latency-percentiles": st.lists(st.floats(0.0001, 1.0), max_size=4, unique=True),
})
HOSTS = st.one_of(st.sampled_from(["statsd", "statsd.monitoring.svc", "10.0.0.7", "[::1]"]),
                  st.text("abcdefghijklmnopqrstuvwxyz0123456789.-", min_size=1, max_size=20))
METRICS = st.one_of(st.just({}), st.fixed_dictionaries(
    {"enabled": st.just(True), "statsdAddress": st.tuples(HOSTS, st.integers(1, 65535)).map(lambda p: f"{p[0]}:{p[1]}")},
    optional={"statsdPrefix": st.text(max_size=30), "statsdInterval": DURATIONS}))


def nsqd_reads(text: str) -> NsqdOptions:
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / NSQD_CONFIG_FILE
        path.write_text(text, encoding="utf-8")
        loaded = load_options([f"--config={path}"])
    assert isinstance(loaded, NsqdOptions), f"nsqd refused its config file (exit {loaded}):\n{text}"
    return loaded


def expected(key: str, value: Any) -> Any:
    if key in {name.replace("-", "_") for name in DURATION_OPTIONS} | {"statsd_interval"}:
        return parse_duration(value)
    if key == "log_level":
        return normalize_level(value)
    return value


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(OPTIONS, METRICS)
def test_every_admitted_value_reaches_nsqd_unchanged(options: dict[str, Any], metrics: dict[str, Any]) -> None:
    try:
        cluster = NsqCluster.from_body({"metadata": {"name": "c", "namespace": "n"},
                                        "spec": {"nsqd": {"options": options}, "metrics": metrics}})
    except ValidationError:
        assume(False)  # the operator refuses it (Degraded): it never reaches a ConfigMap
        raise
    loaded = nsqd_reads(build_configmap(cluster)["data"][NSQD_CONFIG_FILE])
    for key, value in nsqd_tunables(cluster).items():
        assert getattr(loaded, key) == expected(key, value), key


def test_a_prefix_outside_ascii_is_written_as_toml_reads_it() -> None:
    cluster = NsqCluster.from_body({"metadata": {"name": "c", "namespace": "n"}, "spec": {
        "metrics": {"enabled": True, "statsdAddress": "statsd:8125", "statsdPrefix": "nsq-😀\u0000\"\\"}}})
    assert nsqd_reads(build_configmap(cluster)["data"][NSQD_CONFIG_FILE]).statsd_prefix == "nsq-😀\u0000\"\\"


def test_the_configuration_hash_did_not_move_when_the_writer_changed() -> None:
    """Values from before the switch to tomli-w, with the hashes they had then: a cluster
    upgraded across it keeps its pod template, so no pod restarts for nothing."""
    plain = NsqCluster.from_body({"metadata": {"name": "a", "namespace": "n"}, "spec": {}})
    tuned = NsqCluster.from_body({"metadata": {"name": "a", "namespace": "n"}, "spec": {
        "nsqd": {"options": {"msg-timeout": "2m", "e2e-processing-latency-percentiles": [0.5, 0.99]}},
        "metrics": {"enabled": True, "statsdAddress": "s:8125", "statsdPrefix": "nsq-😀"}}})
    assert options_hash(nsqd_tunables(plain)) == "663f7255379597cf"
    assert options_hash(nsqd_tunables(tuned)) == "61a475eed62e8735"
    assert options_hash(plain.spec.lookupd.options.config_file()) == "76822b85ae273a84"
