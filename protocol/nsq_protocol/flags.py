"""NSQ's command lines: Go's ``flag`` package rules applied to a pydantic options model.

Every field of the model is a flag named like the field with ``-`` for ``_``
(``mem_queue_size`` -> ``--mem-queue-size``). Go's rules: ``-flag`` and ``--flag``,
``=value`` or the next argument as the value, bare booleans, the last of a repeated flag
wins while list flags accumulate, parsing stops at ``--`` or the first non-flag argument.
A config file (TOML, keys spelled like the fields) sits between the defaults and the flags.
Pure functions: reading the file and printing are the caller's.
"""
from __future__ import annotations

import re
import typing
from dataclasses import dataclass, field
from typing import Annotated, Any, Sequence, TypeVar, get_args, get_origin

from pydantic import BaseModel, BeforeValidator, PlainSerializer, ValidationError

M = TypeVar("M", bound=BaseModel)

# ---------------------------------------------------------------------------
# Go durations
# ---------------------------------------------------------------------------
_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)")


def parse_duration(text: str) -> float:
    """Go's ``time.ParseDuration`` (``"1h30m"``, ``"250ms"``, ``"-1.5s"``, ``"0"``) in seconds."""
    s = text.strip()
    sign = 1.0
    if s[:1] in "+-" and s:
        sign = -1.0 if s[0] == "-" else 1.0
        s = s[1:]
    if s == "0":
        return 0.0
    if not s:
        raise ValueError(f"invalid duration {text!r}")
    total, pos = 0.0, 0
    while pos < len(s):
        m = _PART.match(s, pos)
        if m is None:
            raise ValueError(f"invalid duration {text!r}")
        total += float(m.group(1)) * _UNITS[m.group(2)]
        pos = m.end()
    return sign * total


def format_duration(seconds: float) -> str:
    """Go's ``Duration.String()``: ``1h0m0s``, ``2m30s``, ``250ms``, ``1.5s``, ``0s``."""
    ns = round(seconds * 1e9)
    if ns == 0:
        return "0s"
    sign = "-" if ns < 0 else ""
    ns = abs(ns)
    if ns < 1_000_000_000:
        for unit, size in (("ms", 1_000_000), ("µs", 1_000), ("ns", 1)):
            if ns >= size:
                return sign + _trim(ns / size) + unit
    hours, rest = divmod(ns, 3_600_000_000_000)
    minutes, rest = divmod(rest, 60_000_000_000)
    secs = _trim(rest / 1e9) + "s"
    if hours:
        return f"{sign}{hours}h{minutes}m{secs}"
    if minutes:
        return f"{sign}{minutes}m{secs}"
    return sign + secs


def _trim(value: float) -> str:
    return f"{value:.9f}".rstrip("0").rstrip(".")


def _to_seconds(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return parse_duration(value)
        except ValueError as e:
            raise ValueError(str(e)) from None
    if isinstance(value, bool):
        raise ValueError("a duration is expected")
    if isinstance(value, int):  # config files: bare integers are milliseconds, as in NSQ
        return value / 1000.0
    return value


class _DurationMarker:
    """Marks a field as a Go duration (stored as float seconds)."""


Duration = Annotated[
    float,
    BeforeValidator(_to_seconds),
    PlainSerializer(format_duration, return_type=str, when_used="json"),
    _DurationMarker(),
]


def is_duration_field(model: type[BaseModel], name: str) -> bool:
    return any(isinstance(m, _DurationMarker) for m in model.model_fields[name].metadata)


# ---------------------------------------------------------------------------
# the command line
# ---------------------------------------------------------------------------
class FlagError(Exception):
    """A bad command line or config file; the message is one line naming the flag."""


@dataclass
class CommandLine:
    values: dict[str, Any] = field(default_factory=dict)  # field name -> raw value(s)
    config_file: str | None = None
    show_version: bool = False
    show_help: bool = False
    rest: list[str] = field(default_factory=list)  # arguments after the flags


@dataclass(frozen=True)
class _Flag:
    name: str
    field: str | None  # None: accepted and ignored (deprecated)
    is_bool: bool
    is_list: bool


def _kind(annotation: Any) -> tuple[bool, bool]:
    """(is_bool, is_list) of a field's type."""
    origin = get_origin(annotation)
    if origin is Annotated:
        return _kind(get_args(annotation)[0])
    if origin in (list, tuple, set, typing.Sequence):
        return False, True
    if origin in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        args = [a for a in get_args(annotation) if a is not type(None)]
        return _kind(args[0]) if len(args) == 1 else (False, False)
    return annotation is bool, False


def flag_table(model: type[BaseModel], deprecated: dict[str, bool] | None = None) -> dict[str, _Flag]:
    """Flag name -> definition. ``deprecated`` maps ignored flag names to "is boolean"."""
    table: dict[str, _Flag] = {}
    for name, info in model.model_fields.items():
        is_bool, is_list = _kind(info.annotation)
        flag = flag_name(model, name)
        table[flag] = _Flag(flag, name, is_bool, is_list)
    for flag, is_bool in (deprecated or {}).items():
        table[flag] = _Flag(flag, None, is_bool, False)
    return table


def flag_name(model: type[BaseModel], field_name: str) -> str:
    """The flag of a field: ``json_schema_extra={"flag": ...}`` where NSQ's flag and config
    names differ (``--lookupd-tcp-address`` / ``nsqlookupd_tcp_addresses``), else the field
    name with ``-`` for ``_``."""
    extra = model.model_fields[field_name].json_schema_extra
    if isinstance(extra, dict) and isinstance(extra.get("flag"), str):
        return str(extra["flag"])
    return field_name.replace("_", "-")


_TRUE = {"1", "t", "T", "TRUE", "true", "True"}
_FALSE = {"0", "f", "F", "FALSE", "false", "False"}


def parse_command_line(argv: Sequence[str], model: type[BaseModel],
                       deprecated: dict[str, bool] | None = None) -> CommandLine:
    table = flag_table(model, deprecated)
    out = CommandLine()
    args = list(argv)
    i = 0
    while i < len(args):
        arg = args[i]
        if len(arg) < 2 or arg[0] != "-":
            break
        if arg == "--":
            i += 1
            break
        name = arg[2:] if arg.startswith("--") else arg[1:]
        if not name or name[0] in "-=":
            raise FlagError(f"bad flag syntax: {arg}")
        value: str | None = None
        if "=" in name:
            name, value = name.split("=", 1)
        i += 1
        if name in ("version",) and "version" not in table:
            out.show_version = _bool_value(name, value)
            continue
        if name == "config" and "config" not in table:
            if value is None:
                if i >= len(args):
                    raise FlagError("flag needs an argument: -config")
                value, i = args[i], i + 1
            out.config_file = value
            continue
        if name in ("h", "help") and name not in table:
            out.show_help = True
            continue
        flag = table.get(name)
        if flag is None:
            raise FlagError(f"flag provided but not defined: -{name}")
        if flag.is_bool:
            raw: Any = _bool_value(name, value)
        else:
            if value is None:
                if i >= len(args):
                    raise FlagError(f"flag needs an argument: -{name}")
                value, i = args[i], i + 1
            raw = value
        if flag.field is None:
            continue
        if flag.is_list:
            out.values.setdefault(flag.field, []).append(raw)
        else:
            out.values[flag.field] = raw
    out.rest = args[i:]
    return out


def _bool_value(name: str, value: str | None) -> bool:
    if value is None or value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise FlagError(f"invalid boolean value {value!r} for -{name}: parse error")


def build_options(model: type[M], cmdline: CommandLine, config: dict[str, Any] | None = None) -> M:
    """Defaults, then the config file's values, then the flags; one error line on failure."""
    merged: dict[str, Any] = {}
    for key, value in (config or {}).items():
        if key in model.model_fields:
            merged[key] = value
    merged.update(cmdline.values)
    try:
        return model.model_validate(merged)
    except ValidationError as e:
        err = e.errors()[0]
        loc = err["loc"][0] if err["loc"] else ""
        where = f"-{flag_name(model, str(loc))}" if loc in model.model_fields else "options"
        given = merged.get(str(loc), err.get("input"))
        raise FlagError(f"invalid value {given!r} for flag {where}: {err['msg']}") from None


def unknown_config_keys(model: type[BaseModel], config: dict[str, Any]) -> list[str]:
    return sorted(k for k in config if k not in model.model_fields)


def usage(model: type[BaseModel], program: str, *, config: bool = False, version: bool = True) -> str:
    """Go's ``-h``: every flag with its description and default; ``-config`` (the servers'
    config file) and ``-version``, which parse_command_line takes itself, where Go's lists
    them."""
    lines = [f"Usage of {program}:"]
    if config:
        lines += ["  -config string", "    \tpath to config file"]
    for name, info in model.model_fields.items():
        is_bool, is_list = _kind(info.annotation)
        kind = "" if is_bool else (" value" if is_list else " " + _type_word(model, name))
        lines.append(f"  -{flag_name(model, name)}{kind}")
        desc = info.description or ""
        default = info.get_default(call_default_factory=True)
        if default not in (None, "", [], False):
            if is_duration_field(model, name):
                shown = format_duration(default)
            elif isinstance(default, bool):
                shown = "true"
            elif isinstance(default, str):
                shown = f'"{default}"'
            else:
                shown = str(default)
            desc = f"{desc} (default {shown})".strip()
        if desc:
            lines.append(f"    \t{desc}")
    if version:
        lines += ["  -version", "    \tprint version string"]
    return "\n".join(lines)


def _type_word(model: type[BaseModel], name: str) -> str:
    if is_duration_field(model, name):
        return "duration"
    ann = model.model_fields[name].annotation
    return {int: "int", float: "float", str: "string"}.get(ann, "value")  # type: ignore[arg-type]
