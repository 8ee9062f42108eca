"""Config: go-nsq's option names, defaults and bounds, checked on creation and assignment."""
from __future__ import annotations

import json
import socket
from datetime import timedelta

import pytest
from pydantic import ValidationError

from nsq_client import Config

GO_NSQ_DEFAULTS = {
    "dial_timeout": 1.0, "read_timeout": 60.0, "write_timeout": 1.0,
    "lookupd_poll_interval": 60.0, "lookupd_poll_jitter": 0.3, "lookupd_poll_timeout": 60.0,
    "max_requeue_delay": 900.0, "default_requeue_delay": 90.0, "backoff_strategy": "exponential",
    "max_backoff_duration": 120.0, "backoff_multiplier": 1.0, "max_attempts": 5,
    "low_rdy_idle_timeout": 10.0, "low_rdy_timeout": 30.0, "rdy_redistribute_interval": 5.0,
    "heartbeat_interval": 30.0, "sample_rate": 0, "tls_v1": False, "deflate": False,
    "deflate_level": 6, "snappy": False, "output_buffer_size": 16384, "output_buffer_timeout": 0.25,
    "max_in_flight": 1, "msg_timeout": 0.0, "auth_secret": "",
}


def test_defaults_are_go_nsqs() -> None:
    config = Config()
    assert {name: getattr(config, name) for name in GO_NSQ_DEFAULTS} == GO_NSQ_DEFAULTS
    assert config.client_id == socket.gethostname().split(".")[0]
    assert config.hostname == socket.gethostname()
    assert config.user_agent.startswith("nsq_client/")


# option, a value just outside, the range the error must show, a value just inside
BOUNDS = [
    ("read_timeout", 0.099, "[100ms, 5m0s]", 0.1),
    ("read_timeout", 301, "[100ms, 5m0s]", 300),
    ("write_timeout", 0.05, "[100ms, 5m0s]", 0.1),
    ("lookupd_poll_interval", 0.009, "[10ms, 5m0s]", 0.01),
    ("lookupd_poll_interval", 301, "[10ms, 5m0s]", 300),
    ("lookupd_poll_jitter", 1.01, "[0, 1]", 1.0),
    ("lookupd_poll_jitter", -0.1, "[0, 1]", 0.0),
    ("max_requeue_delay", 3601, "[0s, 1h0m0s]", 3600),
    ("default_requeue_delay", -1, "[0s, 1h0m0s]", 0),
    ("max_backoff_duration", 3601, "[0s, 1h0m0s]", 0),
    ("backoff_multiplier", 3601, "[0s, 1h0m0s]", 0),
    ("max_attempts", 65536, "[0, 65535]", 65535),
    ("max_attempts", -1, "[0, 65535]", 0),
    ("low_rdy_idle_timeout", 0.999, "[1s, 5m0s]", 1),
    ("low_rdy_timeout", 301, "[1s, 5m0s]", 300),
    ("rdy_redistribute_interval", 0.0009, "[1ms, 5s]", 0.001),
    ("rdy_redistribute_interval", 5.001, "[1ms, 5s]", 5),
    ("sample_rate", 100, "[0, 99]", 99),
    ("deflate_level", 0, "[1, 9]", 1),
    ("deflate_level", 10, "[1, 9]", 9),
    ("max_in_flight", -1, "[0, inf]", 0),
    ("msg_timeout", -1, "[0s, inf]", 0),
    ("output_buffer_size", -2, "[-1, inf]", -1),
]


# go-nsq also wants heartbeat_interval below read_timeout
ALONG_WITH = {"read_timeout": {"heartbeat_interval": 0.05}}


@pytest.mark.parametrize(("option", "outside", "shown", "inside"), BOUNDS)
def test_out_of_range_values_name_the_option_and_its_range(option: str, outside: float, shown: str,
                                                           inside: float) -> None:
    along = ALONG_WITH.get(option, {})
    with pytest.raises(ValidationError) as created:
        Config(**{option: outside}, **along)
    assert option in str(created.value) and shown in str(created.value)

    config = Config(**{option: inside}, **along)
    assert getattr(config, option) == inside
    with pytest.raises(ValidationError) as assigned:
        setattr(config, option, outside)
    assert option in str(assigned.value) and shown in str(assigned.value)
    assert getattr(config, option) == inside


def test_durations_accept_seconds_go_strings_and_timedeltas() -> None:
    config = Config(read_timeout="1m30s", write_timeout=timedelta(milliseconds=250), dial_timeout=2)
    assert (config.read_timeout, config.write_timeout, config.dial_timeout) == (90.0, 0.25, 2.0)
    config.lookupd_poll_interval = "15s"
    assert config.lookupd_poll_interval == 15.0
    with pytest.raises(ValidationError, match="read_timeout"):
        Config(read_timeout="soon")
    with pytest.raises(ValidationError):
        Config(read_timeout=True)


def test_durations_serialise_as_go_durations() -> None:
    dumped = json.loads(Config(read_timeout=90, output_buffer_timeout=0.25).model_dump_json())
    assert dumped["read_timeout"] == "1m30s"
    assert dumped["output_buffer_timeout"] == "250ms"
    assert "tls_context" not in dumped


def test_unknown_options_are_refused() -> None:
    with pytest.raises(ValidationError, match="max_inflight"):
        Config(max_inflight=3)


def test_heartbeat_interval_must_be_below_read_timeout() -> None:
    with pytest.raises(ValidationError, match="heartbeat_interval.*less than read_timeout"):
        Config(heartbeat_interval=61)
    config = Config(heartbeat_interval=5, read_timeout=10)
    with pytest.raises(ValidationError, match="heartbeat_interval"):
        config.read_timeout = 4
    assert config.read_timeout == 10


def test_deflate_and_snappy_exclude_each_other() -> None:
    Config(deflate=True)
    Config(snappy=True)
    with pytest.raises(ValidationError, match="deflate and snappy"):
        Config(deflate=True, snappy=True)


def test_tls_cert_needs_its_key() -> None:
    with pytest.raises(ValidationError, match="tls_cert and tls_key"):
        Config(tls_cert="/tmp/cert.pem")


def test_backoff_strategy_is_exponential_or_full_jitter() -> None:
    assert Config(backoff_strategy="full_jitter").backoff_strategy == "full_jitter"
    with pytest.raises(ValidationError, match="backoff_strategy"):
        Config(backoff_strategy="linear")


def test_identify_body_carries_the_negotiable_options_in_milliseconds() -> None:
    body = Config(client_id="c1", hostname="h1", user_agent="ua/1", heartbeat_interval=5,
                  output_buffer_size=4096, output_buffer_timeout=0.1, sample_rate=10,
                  msg_timeout=30, deflate=True, deflate_level=3).identify_body()
    assert body == {
        "client_id": "c1", "hostname": "h1", "user_agent": "ua/1", "feature_negotiation": True,
        "heartbeat_interval": 5000, "output_buffer_size": 4096, "output_buffer_timeout": 100,
        "tls_v1": False, "deflate": True, "deflate_level": 3, "snappy": False, "sample_rate": 10,
        "msg_timeout": 30000,
    }
    disabled = Config(heartbeat_interval=-1, output_buffer_timeout=-1).identify_body()
    assert disabled["heartbeat_interval"] == -1 and disabled["output_buffer_timeout"] == -1
