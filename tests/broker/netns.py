"""Network namespaces for partition tests: each node its own namespace, joined to the
host by a veth pair on one bridge, so the test (on the host) reaches every node while
iptables rules inside a namespace cut chosen links between nodes. Needs root and
iproute2/iptables; ``available()`` says whether this machine can."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

from tests.servers import Nsqd

# unique per process, so two runs on one machine (two worktrees) do not meet
_TAG = os.getpid() % 100000
BRIDGE = f"nsqbr{_TAG}"
PREFIX = f"10.233.{_TAG % 250}."
HOST_IP = PREFIX + "254"


def _run(*argv: str) -> None:
    done = subprocess.run(argv, capture_output=True, timeout=10)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: exit {done.returncode}: {done.stderr.decode(errors='replace').strip()}")


def _host_end(i: int) -> str:
    return f"v{_TAG}h{i}"


def available() -> bool:
    return os.geteuid() == 0 and all(shutil.which(tool) for tool in ("ip", "iptables"))


class Namespaces:
    """``count`` namespaces ``nsq33-<pid>-<i>`` with addresses 10.233.<pid % 250>.1...;
    ``close`` removes every one of them and the bridge."""

    def __init__(self, count: int) -> None:
        self.names = [f"nsq33-{os.getpid()}-{i}" for i in range(count)]
        self.ips = [PREFIX + str(i + 1) for i in range(count)]
        self._made: list[str] = []
        try:
            self._up()
        except BaseException:
            self.close()
            raise

    def _up(self) -> None:
        subprocess.run(["ip", "link", "del", BRIDGE], capture_output=True)  # left by a killed run
        _run("ip", "link", "add", BRIDGE, "type", "bridge")
        _run("ip", "addr", "add", f"{HOST_IP}/24", "dev", BRIDGE)
        _run("ip", "link", "set", BRIDGE, "up")
        for i, (name, ip) in enumerate(zip(self.names, self.ips)):
            _run("ip", "netns", "add", name)
            self._made.append(name)
            host_end, inner_end = _host_end(i), f"v{_TAG}n{i}"
            # a namespace is destroyed after "ip netns del" returns, and its veth with it:
            # the previous test's pair of this name may still be there
            subprocess.run(["ip", "link", "del", host_end], capture_output=True)
            _run("ip", "link", "add", host_end, "type", "veth", "peer", "name", inner_end)
            _run("ip", "link", "set", inner_end, "netns", name)
            _run("ip", "link", "set", host_end, "master", BRIDGE, "up")
            self.exec(name, "ip", "addr", "add", f"{ip}/24", "dev", inner_end)
            self.exec(name, "ip", "link", "set", inner_end, "up")
            self.exec(name, "ip", "link", "set", "lo", "up")

    def exec(self, name: str, *argv: str) -> None:
        _run("ip", "netns", "exec", name, *argv)

    def cut(self, a: int, b: int) -> None:
        """Drop every packet between nodes a and b, both ways."""
        for me, other in ((a, b), (b, a)):
            self.exec(self.names[me], "iptables", "-A", "INPUT", "-s", self.ips[other], "-j", "DROP")
            self.exec(self.names[me], "iptables", "-A", "OUTPUT", "-d", self.ips[other], "-j", "DROP")

    def throttle(self, i: int, rate: str) -> None:
        """Node i's sends leave at ``rate`` (tc's units, "4mbit"): a slow or congested
        network. The queue holds 50 ms of it, so a ping is not stuck behind seconds of
        data; what overflows it is dropped and TCP sends it again."""
        self.exec(self.names[i], "tc", "qdisc", "add", "dev", f"v{_TAG}n{i}", "root", "tbf",
                  "rate", rate, "burst", "16kb", "latency", "50ms")

    def heal(self) -> None:
        for name in self.names:
            self.exec(name, "iptables", "-F")

    def close(self) -> None:
        for i in range(len(self._made)):  # deleting one end of a pair deletes both, at once
            subprocess.run(["ip", "link", "del", _host_end(i)], capture_output=True)
        for name in self._made:
            subprocess.run(["ip", "netns", "del", name], capture_output=True)
        self._made = []
        subprocess.run(["ip", "link", "del", BRIDGE], capture_output=True)


class NetnsNsqd(Nsqd):
    """nsqd started inside a namespace (``ip netns exec`` execs it: the pid is nsqd's)."""

    def __init__(self, workdir: Path, flags: dict[str, Any], namespace: str, host: str) -> None:
        super().__init__(workdir, flags, host=host, tcp_port=4150, http_port=4151)
        self.namespace = namespace

    def argv(self) -> list[str]:
        return ["ip", "netns", "exec", self.namespace, *super().argv()]
