"""The two versions every command names: this project's release and the NSQ release it
speaks.

The release is the package's version, written in one place (``pyproject.toml``) and read
back from the metadata of the installed distribution that carries this package:
``nsq-client`` as users install it (every other distribution requires it at the same
version: ``distributions/``), or the repository's development install; the chart's ``version`` and
``appVersion`` and the image tag equal it (tests/test_release.py and
tests/chart/test_chart.py fail otherwise). ``NSQ_VERSION`` is the Go NSQ release whose
protocols, flags, HTTP answers and on-disk formats nsqd, nsqlookupd and nsqadmin keep: it
is what they report on the wire (IDENTIFY, ``/info``, ``/stats``, lookupd registrations),
because NSQ clients and nsqadmin compare it to decide what a node supports.

``--version`` of a program named as one of Go NSQ's (nsqd, nsqlookupd, nsqadmin,
nsq_tail, nsq_stat, to_nsq) keeps Go's line, ``nsqd v1.3.0 (built w/go1.19.8)``, with the
NSQ version first, so that scripts reading it as Go's see the NSQ release it is
compatible with (the nsq-cluster gem, which nsq-ruby's and krakow's tests start nsqd
through, takes a line beginning ``nsqd v0`` for a pre-1.0 nsqd and passes it
``--worker-id``), and names the release inside the parentheses::

    nsqd v1.3.0 (nsq-operator v0.1.0, built w/python3.11.9)

The project's own commands (nsq-operator, nsq-local, nsq-spark) lead with the release::

    nsq-operator v0.1.0 (NSQ v1.3.0, built w/python3.11.9)
"""
from __future__ import annotations

import os
import platform
import sys
from typing import Final

DISTRIBUTION: Final = "nsq-operator"  # the project, as every --version line names it
NSQ_VERSION: Final = "1.3.0"
# the distributions that carry nsq_protocol: the published client, the development install
CARRIERS: Final = ("nsq-client", DISTRIBUTION)


def _release() -> str:
    for carrier in CARRIERS:
        named = _named_by_dist_info(carrier)
        if named:
            return named
    from importlib import metadata  # 60-120 ms of imports, paid by every nsqd start otherwise
    for carrier in CARRIERS:
        try:
            return metadata.version(carrier)
        except metadata.PackageNotFoundError:
            continue
    return "0+unknown"  # imported from a source tree that was never installed


def _named_by_dist_info(distribution: str) -> str | None:
    """The version in the name of the distribution's ``<name>-<version>.dist-info``
    directory, in the first entry of ``sys.path`` that has one (where importlib.metadata
    would find it). None when that entry has several, or an ``.egg-info`` (importlib.metadata
    then decides), or none has any."""
    prefix = distribution.replace("-", "_").lower() + "-"
    for entry in sys.path:
        try:
            names = os.listdir(entry or ".")
        except OSError:
            continue
        found = [n for n in names if n.lower().startswith(prefix) and n.endswith((".dist-info", ".egg-info"))]
        if not found:
            continue
        if len(found) == 1 and found[0].endswith(".dist-info"):
            return found[0][len(prefix):-len(".dist-info")]
        return None
    return None


RELEASE: Final = _release()


def _python() -> str:
    return f"python{platform.python_version()}"


def nsq_program_version(program: str) -> str:
    """``--version`` of a program Go NSQ also has: Go's line, the release in parentheses."""
    return f"{program} v{NSQ_VERSION} ({DISTRIBUTION} v{RELEASE}, built w/{_python()})"


def own_program_version(program: str) -> str:
    """``--version`` of one of the project's own commands."""
    return f"{program} v{RELEASE} (NSQ v{NSQ_VERSION}, built w/{_python()})"
