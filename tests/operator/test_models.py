"""The CRD models: NSQ's defaults, and bad specs rejected with the field named."""
from __future__ import annotations

import pytest
from pydantic import ValidationError

from nsq_operator.models import NsqChannelSpec, NsqClusterSpec, NsqTopicSpec


def locations(error: ValidationError) -> list[str]:
    return [".".join(str(part) for part in e["loc"]) for e in error.errors()]


def test_an_empty_spec_gets_nsqs_defaults() -> None:
    spec = NsqClusterSpec.model_validate({})
    assert spec.nsqd.replicas == 3 and spec.lookupd.replicas == 3
    options = spec.nsqd.options.wire()
    assert options["mem-queue-size"] == 10000
    assert options["msg-timeout"] == "60s"
    assert options["max-msg-timeout"] == "15m"
    assert options["max-rdy-count"] == 2500
    assert spec.nsqd.storage.when_scaled == "Retain"


def test_options_are_spelled_as_nsqs_flags() -> None:
    spec = NsqClusterSpec.model_validate({"nsqd": {"options": {"mem-queue-size": 0, "sync-every": 1}}})
    assert spec.nsqd.options.config_file()["mem_queue_size"] == 0
    assert spec.nsqd.options.config_file()["sync_every"] == 1


@pytest.mark.parametrize("spec, field", [
    ({"nsqd": {"replicas": -1}}, "nsqd.replicas"),
    ({"lookupd": {"replicas": 0}}, "lookupd.replicas"),
    ({"nsqd": {"options": {"max-deflate-level": 10}}}, "nsqd.options.max-deflate-level"),
    ({"nsqd": {"options": {"msg-timeout": "soon"}}}, "nsqd.options.msg-timeout"),
    ({"nsqd": {"options": {"msg-timeout": "0s"}}}, "nsqd.options.msg-timeout"),
    ({"nsqd": {"options": {"no-such-flag": 1}}}, "nsqd.options.no-such-flag"),
    ({"nsqd": {"storage": {"size": "ten gigs"}}}, "nsqd.storage.size"),
    ({"drainTimeoutSeconds": -5}, "drainTimeoutSeconds"),
    ({"metrics": {"enabled": True}}, "metrics"),
    ({"imagePullPolicy": "Sometimes"}, "imagePullPolicy"),
])
def test_bad_cluster_specs_name_the_field(spec: dict, field: str) -> None:
    with pytest.raises(ValidationError) as caught:
        NsqClusterSpec.model_validate(spec)
    assert any(loc.startswith(field) for loc in locations(caught.value)), locations(caught.value)


def test_message_timeouts_must_be_in_order() -> None:
    with pytest.raises(ValidationError, match="max-msg-timeout must not be below msg-timeout"):
        NsqClusterSpec.model_validate({"nsqd": {"options": {"msg-timeout": "20m", "max-msg-timeout": "15m"}}})


@pytest.mark.parametrize("name", ["orders", "a.b_c-d", "x" * 64, "tmp#ephemeral"])
def test_nsq_names_accepted(name: str) -> None:
    assert NsqTopicSpec.model_validate({"cluster": "demo", "topicName": name}).topic_name == name
    assert NsqChannelSpec.model_validate({"cluster": "demo", "topic": name, "channelName": name}).channel_name == name


@pytest.mark.parametrize("name", ["", "has space", "x" * 65, "slash/no", "#ephemeral", "a#b"])
def test_bad_nsq_names_rejected(name: str) -> None:
    with pytest.raises(ValidationError) as caught:
        NsqTopicSpec.model_validate({"cluster": "demo", "topicName": name})
    assert locations(caught.value) == ["topicName"]
    with pytest.raises(ValidationError) as caught:
        NsqChannelSpec.model_validate({"cluster": "demo", "topic": "ok", "channelName": name})
    assert locations(caught.value) == ["channelName"]


def test_topic_defaults_and_policy() -> None:
    spec = NsqTopicSpec.model_validate({"cluster": "demo"})
    assert spec.topic_name is None and spec.paused is False and spec.deletion_policy == "Retain"
    with pytest.raises(ValidationError):
        NsqTopicSpec.model_validate({"cluster": "demo", "deletionPolicy": "Orphan"})
    with pytest.raises(ValidationError):
        NsqTopicSpec.model_validate({})
