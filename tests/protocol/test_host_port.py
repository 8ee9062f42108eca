"""``host:port`` option values as Go's net.SplitHostPort reads them, and the three kinds
of address options built on it."""
from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import TypeAdapter, ValidationError

from nsq_protocol.host_port import (BroadcastHost, DialAddress, ListenAddress, OptionalDialAddress, join_host_port,
                                    split_dial_address, split_host_port, split_listen_address)


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


def test_dial_and_listen_addresses_and_joining() -> None:
    assert split_dial_address("[::1]:4150") == ("::1", 4150)
    with pytest.raises(ValueError, match="missing host"):
        split_dial_address(":4150")
    with pytest.raises(ValueError, match="port 0"):
        split_dial_address("127.0.0.1:0")
    assert split_listen_address(":4150") == ("0.0.0.0", 4150)
    assert split_listen_address("[::]:0") == ("::", 0)
    assert join_host_port("::1", 4150) == "[::1]:4150"
    assert join_host_port("nsqd-0.nsqd", 4150) == "nsqd-0.nsqd:4150"


@given(host=st.one_of(st.ip_addresses().map(str), st.from_regex(r"[a-z][a-z0-9.-]{0,20}", fullmatch=True)),
       port=st.integers(1, 65535))
def test_join_then_split_gives_back_host_and_port(host: str, port: int) -> None:
    assert split_dial_address(join_host_port(host, port)) == (host, port)
