"""``nsqd``: parse NSQ's flags (and ``--config``), run until SIGTERM or SIGINT."""
from __future__ import annotations

import asyncio
import gc
import signal
import sys
import tomllib
from typing import Sequence

from nsq_protocol.flags import FlagError, build_options, parse_command_line, unknown_config_keys, usage
from nsq_protocol.version import nsq_program_version

from . import logs
from .options import DEPRECATED_FLAGS, NsqdOptions


def version_line() -> str:
    return nsq_program_version("nsqd")


def load_options(argv: Sequence[str]) -> NsqdOptions | int:
    """The options, or an exit code when the command line says to exit (or is wrong)."""
    try:
        cmdline = parse_command_line(argv, NsqdOptions, DEPRECATED_FLAGS)
        if cmdline.show_help:
            print(usage(NsqdOptions, "nsqd", config=True), file=sys.stderr)
            return 0
        if cmdline.show_version:
            print(version_line())
            return 0
        config: dict = {}
        if cmdline.config_file:
            try:
                with open(cmdline.config_file, "rb") as f:
                    config = tomllib.load(f)
            except (OSError, tomllib.TOMLDecodeError) as e:
                raise FlagError(f"failed to load config file {cmdline.config_file}: {e}") from None
        options = build_options(NsqdOptions, cmdline, config)
        for key in unknown_config_keys(NsqdOptions, config):
            print(f"nsqd: ignoring unknown config file option {key!r}", file=sys.stderr)
        return options
    except FlagError as e:
        print(f"nsqd: {e}", file=sys.stderr)
        return 2


async def serve(options: NsqdOptions) -> int:
    from .nsqd import NSQD

    nsqd = NSQD(options)
    started = False
    signalled_early = False

    def on_signal() -> None:
        # a signal drains (a second one cuts the drain's wait short); so does POST /drain
        nonlocal signalled_early
        if started:
            nsqd.drain.on_signal()
        else:
            signalled_early = True

    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, on_signal)
    await nsqd.start()
    started = True
    if signalled_early:
        nsqd.drain.on_signal()
    await nsqd.wait_stopped()
    return 1 if nsqd.fatal_error is not None else 0  # logged where it failed


def install_event_loop() -> None:
    try:
        import uvloop
    except ImportError:
        return
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())


def tune_gc() -> None:
    """Queued messages are long-lived objects by the hundred thousand: with the default
    thresholds the collector rescans them again and again while they are published. The
    objects alive after start-up (modules, pydantic models) are frozen out of every scan."""
    gc.freeze()
    gc.set_threshold(100_000, 50, 100)


def main(argv: Sequence[str] | None = None) -> int:
    result = load_options(sys.argv[1:] if argv is None else argv)
    if isinstance(result, int):
        return result
    log = logs.setup("nsqd", result.log_level, result.log_prefix, result.log_format)
    log.info(version_line())
    install_event_loop()
    tune_gc()
    try:
        return asyncio.run(serve(result))
    except OSError as e:
        log.critical("failed to start: %s", e)
        return 1
    except ValueError as e:
        log.critical("%s", e)
        return 1


if __name__ == "__main__":
    sys.exit(main())
