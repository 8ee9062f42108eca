"""``host:port`` option values, checked the way Go's ``net.SplitHostPort`` reads them.

``ListenAddress`` is where a server binds (``0.0.0.0:4150``, ``[::1]:0``, ``:4150``; port
0 asks the system for one). ``DialAddress`` is where it connects to (a lookupd, a statsd
daemon): any host name, a port from 1 to 65535. ``BroadcastHost`` is a bare host name or
IP that other programs join with a port. Names are not resolved here: a DNS name that
does not resolve yet is a valid value."""
from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator

MAX_PORT = 65535


def split_host_port(address: str) -> tuple[str, int]:
    """``host:port``, ``[v6]:port`` or ``:port`` into (host, port); ValueError otherwise."""
    if address.startswith("["):
        end = address.find("]")
        if end < 0:
            raise ValueError("missing ']' in address")
        if address[end + 1:end + 2] != ":":
            raise ValueError("missing port in address")
        host, port_text = address[1:end], address[end + 2:]
    else:
        host, sep, port_text = address.rpartition(":")
        if not sep:
            raise ValueError("missing port in address")
        if ":" in host:
            raise ValueError("too many colons in address (an IPv6 host goes in brackets)")
    if "[" in host or "]" in host:
        raise ValueError("unexpected bracket in address")
    if not port_text.isascii() or not port_text.isdigit():
        raise ValueError(f"invalid port {port_text!r}")
    port = int(port_text)
    if port > MAX_PORT:
        raise ValueError(f"port {port} out of range 0-{MAX_PORT}")
    return host, port


def split_dial_address(address: str) -> tuple[str, int]:
    """Where to connect: ``host:port`` with a host and a port from 1 to 65535."""
    host, port = split_host_port(address)
    if not host:
        raise ValueError(f"missing host in address {address!r}")
    if port == 0:
        raise ValueError("port 0 cannot be connected to")
    return host, port


def split_listen_address(address: str) -> tuple[str, int]:
    """Where to bind: ``host:port`` whose empty host (``:4150``) is every IPv4 interface."""
    host, port = split_host_port(address)
    return host or "0.0.0.0", port


def join_host_port(host: str, port: int) -> str:
    """Go's ``net.JoinHostPort``: ``host:port``, an IPv6 host in brackets."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _listen_address(value: str) -> str:
    split_host_port(value)
    return value


def _dial_address(value: str) -> str:
    _, port = split_host_port(value)
    if port == 0:
        raise ValueError("port 0 cannot be connected to")
    return value


def _optional_dial_address(value: str) -> str:
    return value and _dial_address(value)


def _broadcast_host(value: str) -> str:
    if not value:
        raise ValueError("an address is required")
    if any(c.isspace() or not c.isprintable() for c in value) or any(c in value for c in "[]/"):
        raise ValueError("not a host name or IP address")
    if value.count(":") == 1:
        raise ValueError("a host without a port is expected")
    return value


ListenAddress = Annotated[str, AfterValidator(_listen_address)]
DialAddress = Annotated[str, AfterValidator(_dial_address)]
OptionalDialAddress = Annotated[str, AfterValidator(_optional_dial_address)]  # "" turns it off
BroadcastHost = Annotated[str, AfterValidator(_broadcast_host)]
