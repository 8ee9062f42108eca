"""``host:port`` strings, the form NSQ addresses are written in everywhere."""
from __future__ import annotations


def split_address(address: str) -> tuple[str, int]:
    """``"127.0.0.1:4150"`` -> ``("127.0.0.1", 4150)``; ``"[::1]:4150"`` -> ``("::1", 4150)``."""
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ValueError(f"not a host:port address: {address!r}")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host, int(port)


def join_address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
