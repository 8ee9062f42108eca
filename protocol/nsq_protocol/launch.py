"""Where every console script starts: the program's ``main`` is imported and run, and a
Python module it needs that is not installed is reported as one line naming what to
install, never as a traceback::

    nsq-spark: the Python module pyspark is not installed: pip install 'nsq-spark[spark]'

Each package's ``console`` module calls :func:`launch` with the program's name, its
``main`` as ``module:function`` and its distribution; ``extras`` maps a module that comes
with an extra (or from elsewhere) to what to install for it. This module imports nothing
outside the standard library, so that it runs whatever is missing.
"""
from __future__ import annotations

import sys
from importlib import import_module
from typing import Callable, Mapping

MISSING_MODULE = 1  # the exit status when a needed module is not installed

# this project's import packages and the distribution each comes in
OWN_PACKAGES: Mapping[str, str] = {
    "nsq_protocol": "nsq-client", "nsq_client": "nsq-client",
    "nsqd": "nsq-servers", "nsqlookupd": "nsq-servers", "nsqadmin": "nsq-servers", "nsq_local": "nsq-servers",
    "nsq_operator": "nsq-operator",
    "nsq_spark": "nsq-spark",
}


def what_to_install(module: str, distribution: str, extras: Mapping[str, str]) -> str:
    """The requirement that brings the top-level ``module``: the extra that has it, the
    distribution of one of this project's packages, else the program's distribution
    (which depends on it)."""
    return extras.get(module) or OWN_PACKAGES.get(module) or distribution


def missing_message(program: str, error: ModuleNotFoundError, distribution: str, extras: Mapping[str, str]) -> str:
    module = (error.name or "").split(".")[0]
    if not module:
        return f"{program}: {error}"
    requirement = what_to_install(module, distribution, extras)
    return f"{program}: the Python module {module} is not installed: pip install '{requirement}'"


def launch(program: str, target: str, distribution: str, extras: Mapping[str, str] | None = None) -> int:
    """Run ``target`` (``module:function``, called with no arguments); its return value
    is the exit status. A module not found while importing or running it ends the
    program with :data:`MISSING_MODULE` and one line on stderr."""
    module_name, _, function = target.partition(":")
    try:
        main: Callable[[], int | None] = getattr(import_module(module_name), function)
        return main() or 0
    except ModuleNotFoundError as error:
        print(missing_message(program, error, distribution, extras or {}), file=sys.stderr)
        return MISSING_MODULE
