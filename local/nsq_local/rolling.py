"""A rolling restart: one nsqd at a time is drained, waited for until it exits, started
again on the same data directory and ports, and waited for until it is ready and
registered with every lookupd; only then is the next one touched.

The drain is ``POST /drain`` when the nsqd offers it, else SIGTERM (a graceful stop that
persists everything). A node that does not exit by itself within ``exit_timeout`` is
killed; like a node that exits with a non-zero code, it is started again (its data must
not be stranded) and the roll stops there: a roll never goes on past a node that did not
stop cleanly.
"""
from __future__ import annotations

import logging
import signal
import time
from dataclasses import dataclass
from typing import Callable, Literal

import aiohttp

from .cluster import LocalCluster
from .processes import Node

log = logging.getLogger("nsq_local")

DRAIN_BY_HTTP = "POST /drain"
DRAIN_BY_SIGTERM = "SIGTERM"

DrainBy = Literal["auto", "http", "sigterm"]  # auto: POST /drain where nsqd offers it, else SIGTERM


@dataclass(frozen=True)
class NodeRestart:
    name: str
    drained_by: str
    drain_seconds: float      # from the drain request to the process's exit
    exit_code: int | None     # None: killed after exit_timeout
    back_seconds: float       # from the exit to ready and registered again
    held: int                 # messages the node held (queued, in flight, deferred) just before its drain

    @property
    def clean(self) -> bool:
        return self.exit_code == 0


class RollingRestartError(RuntimeError):
    def __init__(self, message: str, restarts: list[NodeRestart]) -> None:
        super().__init__(message)
        self.restarts = restarts


async def drain_and_wait(cluster: LocalCluster, node: Node, exit_timeout: float,
                         drain_by: DrainBy = "auto") -> tuple[str, float, int | None]:
    """Drain ``node`` and wait for its exit: how, how long, and its exit code (None when it
    had to be killed)."""
    started = time.monotonic()
    if drain_by == "http" or (drain_by == "auto" and await cluster.has_drain(node)):
        drained_by = DRAIN_BY_HTTP
        async with cluster.session.post(f"http://{node.http_address}/drain") as resp:
            if resp.status != 200:
                raise RuntimeError(f"{node.name}: POST /drain answered {resp.status}: {await resp.text()}")
    else:
        drained_by = DRAIN_BY_SIGTERM
        node.signal(signal.SIGTERM)
    code = await node.wait_exited(exit_timeout)
    seconds = time.monotonic() - started
    if code is None:
        log.error("%s did not exit within %.0fs of its drain: killing it", node.name, exit_timeout)
        await node.kill()
    return drained_by, seconds, code


async def restart_node(cluster: LocalCluster, node: Node, exit_timeout: float,
                       drain_by: DrainBy = "auto") -> NodeRestart:
    held = await cluster.messages_held(node)
    log.info("%s: draining (it holds %d messages)", node.name, held)
    drained_by, drain_seconds, code = await drain_and_wait(cluster, node, exit_timeout, drain_by)
    # started again even after an unclean stop: what it has on disk must not be stranded
    log.info("%s: exited with %s after %.2fs (%s); starting it again", node.name, code, drain_seconds, drained_by)
    exited = time.monotonic()
    await cluster.start_nsqd(node)
    back = time.monotonic() - exited
    log.info("%s: ready and registered %.2fs after its exit", node.name, back)
    return NodeRestart(node.name, drained_by, drain_seconds, code, back, held)


async def rolling_restart(cluster: LocalCluster, exit_timeout: float = 60.0, drain_by: DrainBy = "auto",
                          on_restart: Callable[[NodeRestart], None] | None = None) -> list[NodeRestart]:
    """Restart every nsqd of ``cluster`` in turn; :class:`RollingRestartError` (carrying
    the restarts done) when a node does not stop cleanly or does not come back."""
    restarts: list[NodeRestart] = []
    for node in cluster.nsqds:
        try:
            result = await restart_node(cluster, node, exit_timeout, drain_by)
        except (RuntimeError, TimeoutError, OSError, aiohttp.ClientError) as err:
            raise RollingRestartError(f"{node.name}: {err}; rolling restart stopped", restarts) from err
        restarts.append(result)
        if on_restart is not None:
            on_restart(result)
        if not result.clean:
            raise RollingRestartError(f"{node.name} exited with {result.exit_code} after its drain: "
                                      "rolling restart stopped", restarts)
    return restarts
