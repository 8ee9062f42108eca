"""IDENTIFY: parsing the client's JSON and negotiating it against nsqd's bounds."""
from __future__ import annotations

import dataclasses
import json

import pytest

from nsq_protocol import ProtocolError
from nsq_protocol.identify import IdentifyRequest, Negotiated, ServerLimits, negotiate

# nsqd v1.3.0's defaults (heartbeat = --client-timeout / 2), TLS off, auth off
NSQD_DEFAULTS = ServerLimits(
    version="1.3.0",
    max_rdy_count=2500,
    msg_timeout_ms=60_000,
    max_msg_timeout_ms=15 * 60_000,
    heartbeat_interval_ms=30_000,
    max_heartbeat_interval_ms=60_000,
    output_buffer_size=16 * 1024,
    max_output_buffer_size=64 * 1024,
    output_buffer_timeout_ms=250,
    min_output_buffer_timeout_ms=25,
    max_output_buffer_timeout_ms=30_000,
    max_deflate_level=6,
    deflate_enabled=True,
    snappy_enabled=True,
    tls_available=False,
    auth_required=False,
)


def limits(**changes) -> ServerLimits:
    return dataclasses.replace(NSQD_DEFAULTS, **changes)


def parse(data: dict) -> IdentifyRequest:
    return IdentifyRequest.parse(json.dumps(data).encode())


def negotiated(data: dict, server: ServerLimits = NSQD_DEFAULTS) -> Negotiated:
    return negotiate(parse(data), server)


def refusal(data: dict, server: ServerLimits = NSQD_DEFAULTS) -> ProtocolError:
    with pytest.raises(ProtocolError) as caught:
        negotiated(data, server)
    return caught.value


# ---------------------------------------------------------------------------
# parsing
# ---------------------------------------------------------------------------
def test_parse_reads_every_field() -> None:
    req = parse({"client_id": "c", "hostname": "h", "user_agent": "ua/1", "feature_negotiation": True,
                 "heartbeat_interval": 1000, "output_buffer_size": 64, "output_buffer_timeout": 25,
                 "tls_v1": True, "snappy": False, "deflate": True, "deflate_level": 3,
                 "sample_rate": 10, "msg_timeout": 2000})
    assert (req.client_id, req.hostname, req.user_agent) == ("c", "h", "ua/1")
    assert (req.feature_negotiation, req.tls_v1, req.snappy, req.deflate) == (True, True, False, True)
    assert (req.heartbeat_interval, req.output_buffer_size, req.output_buffer_timeout) == (1000, 64, 25)
    assert (req.deflate_level, req.sample_rate, req.msg_timeout) == (3, 10, 2000)


def test_unknown_keys_are_ignored() -> None:
    req = parse({"long_forgotten": [1, {"x": None}], "extra": "y", "client_id": "c"})
    assert req.client_id == "c"


def test_null_means_not_set() -> None:
    result = negotiated({"heartbeat_interval": None, "msg_timeout": None, "deflate": None,
                         "feature_negotiation": None, "sample_rate": None})
    assert result == negotiated({})


@pytest.mark.parametrize("body", [
    b"{not json",
    b"",
    b"{}{}",
    b"[]",
    b'"a string"',
    b"42",
    b'{"heartbeat_interval": "1000"}',     # string for a number
    b'{"heartbeat_interval": 1000.5}',     # fraction for an integer
    b'{"heartbeat_interval": 1000.0}',     # Go will not put a float into an int either
    b'{"msg_timeout": true}',              # bool for a number
    b'{"feature_negotiation": "true"}',    # string for a bool
    b'{"feature_negotiation": 1}',         # number for a bool
    b'{"client_id": 7}',                   # number for a string
    b'{"hostname": ["h"]}',
    b'{"sample_rate": {}}',
])
def test_bad_json_or_wrong_types_are_e_bad_body(body: bytes) -> None:
    with pytest.raises(ProtocolError) as caught:
        IdentifyRequest.parse(body)
    assert caught.value.code == "E_BAD_BODY"
    assert caught.value.wire_text == b"E_BAD_BODY IDENTIFY failed to decode JSON body"


# ---------------------------------------------------------------------------
# defaults and the response
# ---------------------------------------------------------------------------
def test_empty_identify_keeps_server_defaults() -> None:
    result = negotiated({})
    assert result.heartbeat_interval_ms == 30_000
    assert result.output_buffer_size == 16 * 1024
    assert result.output_buffer_timeout_ms == 250
    assert result.msg_timeout_ms == 60_000
    assert result.sample_rate == 0
    assert (result.feature_negotiation, result.tls, result.deflate, result.snappy) == (
        False, False, False, False)
    assert result.deflate_level == 6


def test_zero_keeps_server_defaults() -> None:
    zeros = {"heartbeat_interval": 0, "output_buffer_size": 0, "output_buffer_timeout": 0,
             "msg_timeout": 0, "sample_rate": 0, "deflate_level": 0}
    assert negotiated(zeros) == negotiated({})


def test_client_metadata_passes_through() -> None:
    result = negotiated({"client_id": "worker-1", "hostname": "box.local", "user_agent": "go-nsq/1.1.0"})
    assert (result.client_id, result.hostname, result.user_agent) == (
        "worker-1", "box.local", "go-nsq/1.1.0")


def test_response_for_defaults() -> None:
    result = negotiated({"feature_negotiation": True})
    assert result.response(NSQD_DEFAULTS) == {
        "max_rdy_count": 2500,
        "version": "1.3.0",
        "max_msg_timeout": 900_000,
        "msg_timeout": 60_000,
        "tls_v1": False,
        "deflate": False,
        "deflate_level": 6,
        "max_deflate_level": 6,
        "snappy": False,
        "sample_rate": 0,
        "auth_required": False,
        "output_buffer_size": 16384,
        "output_buffer_timeout": 250,
    }


def test_response_carries_negotiated_values() -> None:
    server = limits(tls_available=True, auth_required=True, max_deflate_level=9)
    result = negotiated({"feature_negotiation": True, "msg_timeout": 5000, "output_buffer_size": 8192,
                         "output_buffer_timeout": 100, "sample_rate": 50, "heartbeat_interval": 5000,
                         "tls_v1": True, "deflate": True, "deflate_level": 9}, server)
    response = result.response(server)
    assert response == {
        "max_rdy_count": 2500, "version": "1.3.0", "max_msg_timeout": 900_000, "msg_timeout": 5000,
        "tls_v1": True, "deflate": True, "deflate_level": 9, "max_deflate_level": 9,
        "snappy": False, "sample_rate": 50, "auth_required": True, "output_buffer_size": 8192,
        "output_buffer_timeout": 100,
    }
    assert json.loads(json.dumps(response)) == response
    assert result.heartbeat_interval_ms == 5000


# ---------------------------------------------------------------------------
# bounds: -1 disables (where allowed), 0 keeps the default, the rest must be in range
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("value,expected", [(-1, 0), (1000, 1000), (60_000, 60_000), (45_000, 45_000)])
def test_heartbeat_interval_accepted(value: int, expected: int) -> None:
    assert negotiated({"heartbeat_interval": value}).heartbeat_interval_ms == expected


@pytest.mark.parametrize("value", [999, 1, 60_001, -2, -1000])
def test_heartbeat_interval_refused(value: int) -> None:
    err = refusal({"heartbeat_interval": value})
    assert err.code == "E_BAD_BODY"
    assert err.wire_text == b"E_BAD_BODY IDENTIFY heartbeat interval (%d) is invalid" % value


@pytest.mark.parametrize("value,expected", [(64, 64), (65536, 65536), (8192, 8192)])
def test_output_buffer_size_accepted(value: int, expected: int) -> None:
    assert negotiated({"output_buffer_size": value}).output_buffer_size == expected


def test_output_buffer_size_minus_one_disables_buffering_entirely() -> None:
    result = negotiated({"output_buffer_size": -1})
    assert result.output_buffer_size == 1
    assert result.output_buffer_timeout_ms == 0  # nothing is held back, so nothing waits


def test_output_buffer_size_minus_one_overrides_a_requested_timeout() -> None:
    result = negotiated({"output_buffer_size": -1, "output_buffer_timeout": 100})
    assert (result.output_buffer_size, result.output_buffer_timeout_ms) == (1, 0)


@pytest.mark.parametrize("value", [63, 1, 65537, -2])
def test_output_buffer_size_refused(value: int) -> None:
    err = refusal({"output_buffer_size": value})
    assert err.wire_text == b"E_BAD_BODY IDENTIFY output buffer size (%d) is invalid" % value


@pytest.mark.parametrize("value,expected", [(-1, 0), (25, 25), (30_000, 30_000), (100, 100)])
def test_output_buffer_timeout_accepted(value: int, expected: int) -> None:
    assert negotiated({"output_buffer_timeout": value}).output_buffer_timeout_ms == expected


@pytest.mark.parametrize("value", [24, 1, 30_001, -2])
def test_output_buffer_timeout_refused(value: int) -> None:
    err = refusal({"output_buffer_timeout": value})
    assert err.wire_text == b"E_BAD_BODY IDENTIFY output buffer timeout (%d) is invalid" % value


def test_output_buffer_timeout_minimum_follows_the_server() -> None:
    assert negotiated({"output_buffer_timeout": 1}, limits(min_output_buffer_timeout_ms=1)
                      ).output_buffer_timeout_ms == 1


@pytest.mark.parametrize("value", [0, 1, 50, 99])
def test_sample_rate_accepted(value: int) -> None:
    assert negotiated({"sample_rate": value}).sample_rate == value


@pytest.mark.parametrize("value", [-1, 100, 1000])
def test_sample_rate_refused(value: int) -> None:
    err = refusal({"sample_rate": value})
    assert err.wire_text == b"E_BAD_BODY IDENTIFY sample rate (%d) is invalid" % value


@pytest.mark.parametrize("value", [1000, 900_000, 5000])
def test_msg_timeout_accepted(value: int) -> None:
    assert negotiated({"msg_timeout": value}).msg_timeout_ms == value


@pytest.mark.parametrize("value", [999, 900_001, -1, 1])
def test_msg_timeout_refused(value: int) -> None:
    err = refusal({"msg_timeout": value})
    assert err.wire_text == b"E_BAD_BODY IDENTIFY msg timeout (%d) is invalid" % value


def test_bounds_follow_the_server_maximums() -> None:
    server = limits(max_heartbeat_interval_ms=2000, max_output_buffer_size=128,
                    max_output_buffer_timeout_ms=50, max_msg_timeout_ms=3000)
    assert refusal({"heartbeat_interval": 2001}, server).code == "E_BAD_BODY"
    assert refusal({"output_buffer_size": 129}, server).code == "E_BAD_BODY"
    assert refusal({"output_buffer_timeout": 51}, server).code == "E_BAD_BODY"
    assert refusal({"msg_timeout": 3001}, server).code == "E_BAD_BODY"


def test_checks_run_in_nsqds_order() -> None:
    everything_wrong = {"heartbeat_interval": 1, "output_buffer_timeout": 1, "output_buffer_size": 1,
                        "sample_rate": 100, "msg_timeout": 1}
    order = ["heartbeat_interval", "output_buffer_timeout", "output_buffer_size", "sample_rate",
             "msg_timeout"]
    words = ["heartbeat interval", "output buffer timeout", "output buffer size", "sample rate",
             "msg timeout"]
    for i, expected in enumerate(words):
        data = {k: v for k, v in everything_wrong.items() if k in order[i:]}
        assert expected in refusal(data).message


# ---------------------------------------------------------------------------
# features: only with feature_negotiation, only when the server offers them
# ---------------------------------------------------------------------------
def test_features_need_feature_negotiation() -> None:
    server = limits(tls_available=True)
    result = negotiated({"tls_v1": True, "deflate": True}, server)
    assert (result.tls, result.deflate, result.snappy) == (False, False, False)
    assert negotiated({"snappy": True}, server).snappy is False


def test_deflate_and_snappy_without_feature_negotiation_is_not_an_error() -> None:
    result = negotiated({"deflate": True, "snappy": True})
    assert (result.deflate, result.snappy) == (False, False)


def test_deflate_and_snappy_together_is_e_identify_failed() -> None:
    err = refusal({"feature_negotiation": True, "deflate": True, "snappy": True})
    assert err.code == "E_IDENTIFY_FAILED"
    assert err.fatal


def test_both_requested_but_only_one_offered_picks_that_one() -> None:
    both = {"feature_negotiation": True, "deflate": True, "snappy": True}
    assert negotiated(both, limits(snappy_enabled=False)).deflate is True
    only_snappy = negotiated(both, limits(deflate_enabled=False))
    assert (only_snappy.snappy, only_snappy.deflate) == (True, False)


@pytest.mark.parametrize("feature,server_flag", [("tls_v1", "tls_available"),
                                                  ("deflate", "deflate_enabled"),
                                                  ("snappy", "snappy_enabled")])
def test_feature_granted_only_when_offered(feature: str, server_flag: str) -> None:
    attr = {"tls_v1": "tls"}.get(feature, feature)
    request = {"feature_negotiation": True, feature: True}
    assert getattr(negotiated(request, limits(**{server_flag: True})), attr) is True
    assert getattr(negotiated(request, limits(**{server_flag: False})), attr) is False


@pytest.mark.parametrize("requested,max_level,expected", [
    (None, 9, 6),   # nsqd's default level
    (3, 9, 3),
    (9, 9, 9),
    (9, 6, 6),      # clamped to --max-deflate-level
    (0, 9, 6),
    (-4, 9, 6),
    (None, 4, 4),   # even the default is clamped
])
def test_deflate_level(requested: int | None, max_level: int, expected: int) -> None:
    request = {"feature_negotiation": True, "deflate": True, "deflate_level": requested}
    result = negotiated(request, limits(max_deflate_level=max_level))
    assert result.deflate_level == expected
    assert result.response(limits(max_deflate_level=max_level))["deflate_level"] == expected


def test_deflate_level_is_ignored_without_deflate() -> None:
    result = negotiated({"feature_negotiation": True, "deflate_level": 2}, limits(max_deflate_level=9))
    assert (result.deflate, result.deflate_level) == (False, 6)
