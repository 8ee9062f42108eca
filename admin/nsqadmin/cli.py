"""The ``nsqadmin`` command: Go nsqadmin's flags and config file, then serve until
SIGTERM/SIGINT.

Exit codes: 0 after a signal, --version or -h; 2 for a bad flag or option value; 1 when
the config file cannot be read or the listener cannot be bound.
"""
from __future__ import annotations

import asyncio
import logging
import signal
import sys
import tomllib
from typing import Any, Sequence

from nsq_protocol.flags import FlagError, build_options, parse_command_line, usage
from nsq_protocol.logfmt import NsqTextFormatter, level_number
from nsq_protocol.version import nsq_program_version

from .nsqadmin import NSQAdmin
from .options import NsqadminOptions

PROGRAM = "nsqadmin"
DEPRECATED_FLAGS = {"verbose": True}  # accepted, no effect (use --log-level)


def version_string() -> str:
    return nsq_program_version(PROGRAM)


def make_logger(options: NsqadminOptions) -> logging.Logger:
    logger = logging.getLogger(PROGRAM)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(NsqTextFormatter(options.log_prefix))
    logger.handlers[:] = [handler]
    logger.setLevel(level_number(options.log_level))
    logger.propagate = False
    return logger


def main(argv: Sequence[str] | None = None) -> None:
    sys.exit(run(sys.argv[1:] if argv is None else argv))


def run(argv: Sequence[str]) -> int:
    try:
        cmdline = parse_command_line(argv, NsqadminOptions, DEPRECATED_FLAGS)
    except FlagError as e:
        print(e, file=sys.stderr)
        print(usage(NsqadminOptions, PROGRAM, config=True), file=sys.stderr)
        return 2
    if cmdline.show_help:
        print(usage(NsqadminOptions, PROGRAM, config=True), file=sys.stderr)
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
        options = build_options(NsqadminOptions, cmdline, config)
    except FlagError as e:
        print(f"[{PROGRAM}] FATAL: {e}", file=sys.stderr)
        return 2
    logger = make_logger(options)
    logger.info("%s", version_string())
    with asyncio.Runner() as runner:
        return runner.run(serve(options, logger))


async def serve(options: NsqadminOptions, logger: logging.Logger) -> int:
    admin = NSQAdmin(options, logger)
    try:
        await admin.start()
    except OSError as e:
        logger.critical("failed to listen on %s - %s", options.http_address, e.strerror or e)
        return 1
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stopping.set)
    await stopping.wait()
    await admin.stop()
    return 0
