"""What every tool's ``main`` shares: Go flag parsing against the tool's options model,
``-h``/``--version``, one-line errors with exit status 2, and the event loop to run on.

A command line that cannot be run (an unknown flag, a bad value, a required flag
missing, two flags that exclude each other) ends with status 2 and a line naming the
flag; a failure while running ends with status 1.
"""
from __future__ import annotations

import asyncio
import logging
import sys
from typing import Callable, Coroutine, Sequence, TypeVar

from pydantic import BaseModel

from nsq_protocol.flags import FlagError, build_options, parse_command_line, usage
from nsq_protocol.version import nsq_program_version

from ..version import __version__

M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")

USAGE_ERROR = 2
RUN_ERROR = 1


def version_line(program: str) -> str:
    """Go's ``nsq_tail v1.3.0`` line, with the release and the Python in parentheses."""
    return nsq_program_version(program)


def user_agent(program: str) -> str:
    """What a tool's connections tell nsqd in IDENTIFY unless an option says otherwise."""
    return f"{program}/{__version__} nsq_client/{__version__}"


def parse_options(program: str, argv: Sequence[str], model: type[M],
                  check: Callable[[M], None] | None = None) -> M | int:
    """The tool's options, or the exit status when the command line says to exit now
    (help, version) or cannot be run (the error is printed to stderr)."""
    try:
        cmdline = parse_command_line(argv, model)
        if cmdline.show_help:
            print(usage(model, program), file=sys.stderr)
            return 0
        if cmdline.show_version:
            print(version_line(program))
            return 0
        if cmdline.config_file is not None:  # nsqd's --config; the tools have no config file
            raise FlagError("flag provided but not defined: -config")
        options = build_options(model, cmdline)
        if check is not None:
            check(options)
        return options
    except FlagError as err:
        print(f"{program}: {err}", file=sys.stderr)
        return USAGE_ERROR


def fail(program: str, message: str) -> int:
    print(f"{program}: {message}", file=sys.stderr)
    return RUN_ERROR


def run(coro: Coroutine[object, object, T]) -> T:
    """Run the tool's coroutine on uvloop when it is installed; the client's log lines
    go to stderr (stdout is the tool's output)."""
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, datefmt="%Y/%m/%d %H:%M:%S",
                        format="%(asctime)s %(levelname).3s %(message)s")
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coro)
    return uvloop.run(coro)
