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


_HOLDER = """
import sys
from nsq_local.port_reservations import reserve
held = [p for p in range(int(sys.argv[1]), int(sys.argv[2])) if reserve(p)]
print(" ".join(map(str, held)), flush=True)
sys.stdin.read()
"""


def test_a_port_another_process_was_given_is_not_offered_while_it_lives() -> None:
    # a test restarting its server leaves the port unbound for a moment; another test
    # worker took it in that moment and the restart failed (seen in CI)
    import subprocess
    import sys

    from nsq_local.port_reservations import reserve

    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, str(max(1024, low - 12000)), str(low)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None
        held = {int(p) for p in holder.stdout.readline().split()}
        assert held  # all but what this process and other live ones (test workers) hold
        offered = [free_port("127.0.0.1") for _ in range(5)]
        assert not set(offered) & held, offered
        assert not reserve(min(held))
    finally:
        holder.communicate("", timeout=10)
    assert reserve(min(held)), "a reservation outlived its process"
