"""Ports for servers that must keep theirs across restarts come from below the kernel's
ephemeral range, which outgoing connections draw from."""
from __future__ import annotations

import socket
from pathlib import Path

from nsq_local.processes import free_port


def test_free_ports_are_bindable_and_below_the_ephemeral_range() -> None:
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    ports = [free_port("127.0.0.1") for _ in range(20)]
    assert all(1024 <= p < low for p in ports), ports
    assert len(set(ports)) > 1  # chosen, not fixed
    for port in ports[:5]:
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))


def test_a_port_in_use_is_not_offered() -> None:
    held = []
    try:
        for _ in range(50):
            s = socket.socket()
            port = free_port("127.0.0.1")
            s.bind(("127.0.0.1", port))
            s.listen()
            held.append(s)
        assert len({s.getsockname()[1] for s in held}) == 50
    finally:
        for s in held:
            s.close()


def test_ports_taken_before_any_is_bound_are_all_different() -> None:
    # a cluster takes every node's ports first and binds them as the nodes start: a port
    # offered twice went to two nodes and the second one's start failed (seen in CI)
    ports = [free_port("127.0.0.1") for _ in range(1000)]
    assert len(set(ports)) == len(ports)
