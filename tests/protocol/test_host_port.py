"""``host:port`` option values as Go's net.SplitHostPort reads them, and the three kinds
of address options built on it."""
from __future__ import annotations

import pytest
from pydantic import TypeAdapter, ValidationError

from nsq_protocol.host_port import BroadcastHost, DialAddress, ListenAddress, OptionalDialAddress, split_host_port


@pytest.mark.parametrize("address,expected", [
    ("127.0.0.1:4150", ("127.0.0.1", 4150)),
    ("0.0.0.0:0", ("0.0.0.0", 0)),
    (":4151", ("", 4151)),
    ("[::1]:4152", ("::1", 4152)),
    ("[::]:65535", ("::", 65535)),
    ("lookupd-0.lookupd.nsq.svc.cluster.local:4160", ("lookupd-0.lookupd.nsq.svc.cluster.local", 4160)),
])
def test_good_addresses_split(address: str, expected: tuple[str, int]) -> None:
    assert split_host_port(address) == expected


@pytest.mark.parametrize("address,reason", [
    ("garbage", "missing port"),
    ("", "missing port"),
    ("127.0.0.1", "missing port"),
    ("127.0.0.1:", "invalid port"),
    ("127.0.0.1:http", "invalid port"),
    ("127.0.0.1:-1", "invalid port"),
    ("127.0.0.1:４１５０", "invalid port"),  # digits, but not ASCII ones
    ("127.0.0.1:65536", "out of range"),
    ("127.0.0.1:99999999999999999999", "out of range"),
    ("::1:4150", "too many colons"),
    ("[::1]", "missing port"),
    ("[::1:4150", "missing ']'"),
    ("[::1]x:4150", "missing port"),
    ("a]b:4150", "unexpected bracket"),
])
def test_bad_addresses_say_why(address: str, reason: str) -> None:
    with pytest.raises(ValueError, match=reason.replace("[", r"\[").replace("]", r"\]")):
        split_host_port(address)


def test_each_kind_of_address_option() -> None:
    listen, dial = TypeAdapter(ListenAddress), TypeAdapter(DialAddress)
    optional, broadcast = TypeAdapter(OptionalDialAddress), TypeAdapter(BroadcastHost)
    assert listen.validate_python("127.0.0.1:0") == "127.0.0.1:0"  # the system picks the port
    with pytest.raises(ValidationError, match="port 0"):
        dial.validate_python("127.0.0.1:0")
    assert dial.validate_python("statsd:8125") == "statsd:8125"
    assert optional.validate_python("") == ""  # off
    with pytest.raises(ValidationError):
        optional.validate_python("statsd")
    for host in ("127.0.0.1", "::1", "nsqd-0.nsqd.nsq.svc", "my-laptop"):
        assert broadcast.validate_python(host) == host
    for bad in ("", "nsqd-0:4150", "[::1]", "two words", "http://nsqd"):
        with pytest.raises(ValidationError):
            broadcast.validate_python(bad)
