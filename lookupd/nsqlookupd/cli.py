"""The ``nsqlookupd`` command: NSQ's flags and config file, then serve until SIGTERM/SIGINT.

Exit codes: 0 after a signal, --version or -h; 2 for a bad flag or option value; 1 when
the config file cannot be read or a listener cannot be bound.
"""
from __future__ import annotations

import asyncio
import logging
import signal
import sys
import tomllib
from typing import Any, Callable, Sequence

from nsq_protocol.flags import FlagError, build_options, parse_command_line, usage
from nsq_protocol.version import nsq_program_version

from .logs import make_logger
from .nsqlookupd import NSQLookupd
from .options import NsqlookupdOptions

PROGRAM = "nsqlookupd"
DEPRECATED_FLAGS = {"verbose": True}  # accepted, no effect (use --log-level)


def version_string() -> str:
    return nsq_program_version(PROGRAM)


def main(argv: Sequence[str] | None = None) -> None:
    sys.exit(run(sys.argv[1:] if argv is None else argv))


def run(argv: Sequence[str]) -> int:
    try:
        cmdline = parse_command_line(argv, NsqlookupdOptions, DEPRECATED_FLAGS)
    except FlagError as e:
        print(e, file=sys.stderr)
        print(usage(NsqlookupdOptions, PROGRAM, config=True), file=sys.stderr)
        return 2
    if cmdline.show_help:
        print(usage(NsqlookupdOptions, PROGRAM, config=True), file=sys.stderr)
        return 0
    if cmdline.show_version:
        print(version_string())
        return 0

    config: dict[str, Any] = {}
    if cmdline.config_file:
        try:
            with open(cmdline.config_file, "rb") as f:
                config = tomllib.load(f)
        except (OSError, tomllib.TOMLDecodeError) as e:
            print(f"[{PROGRAM}] FATAL: failed to load config file {cmdline.config_file} - {e}", file=sys.stderr)
            return 1
    try:
        options = build_options(NsqlookupdOptions, cmdline, config)
    except FlagError as e:
        print(e, file=sys.stderr)
        return 2

    logger = make_logger(PROGRAM, options.log_prefix, options.log_level, fmt=options.log_format)
    logger.info("%s", version_string())
    with asyncio.Runner(loop_factory=_loop_factory()) as runner:
        return runner.run(serve(options, logger))


async def serve(options: NsqlookupdOptions, logger: logging.Logger) -> int:
    lookupd = NSQLookupd(options, logger)
    try:
        await lookupd.start()
    except OSError as e:
        logger.critical("%s", e.strerror or e)
        return 1
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stopping.set)
    await stopping.wait()
    await lookupd.stop()
    return 0


def _loop_factory() -> Callable[[], asyncio.AbstractEventLoop]:
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop
    return uvloop.new_event_loop
