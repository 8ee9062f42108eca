"""nsq_protocol.flags, the command-line machinery nsqd and nsqlookupd share: Go durations,
Go's flag syntax, and defaults < config file < flags with one-line errors naming the flag."""
from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel, Field

from nsq_protocol.flags import (
    Duration,
    FlagError,
    build_options,
    format_duration,
    parse_command_line,
    parse_duration,
    unknown_config_keys,
    usage,
)


class Demo(BaseModel):
    count: int = Field(1, ge=0, le=100)
    fast: bool = False
    name: str = "x"
    wait: Duration = 2.0
    peers: list[str] = Field(default_factory=list, json_schema_extra={"flag": "peer"})


DEPRECATED = {"verbose": True, "worker-id": False}


def parse(*argv: str) -> Demo:
    return build_options(Demo, parse_command_line(list(argv), Demo, DEPRECATED))


# -- durations -----------------------------------------------------------------------------
@pytest.mark.parametrize("text,seconds", [
    ("0", 0.0), ("-0", 0.0), ("250ms", 0.25), ("1s", 1.0), ("1.5s", 1.5), (".5s", 0.5),
    ("2.s", 2.0), ("1m30s", 90.0), ("1h", 3600.0), ("1.5h", 5400.0), ("1h2m3.5s", 3723.5),
    ("-1.5s", -1.5), ("+2m", 120.0), ("300us", 0.0003), ("300µs", 0.0003), ("7ns", 7e-9),
    ("1h1h", 7200.0),
])
def test_parse_duration(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds, abs=1e-12)


@pytest.mark.parametrize("text", ["", "5", "1x", "s", "1.5", "h1", "1 s", "--1s", "1s5"])
def test_parse_duration_refuses_what_go_refuses(text: str) -> None:
    with pytest.raises(ValueError):
        parse_duration(text)


@pytest.mark.parametrize("seconds,text", [
    (0, "0s"), (3600, "1h0m0s"), (60, "1m0s"), (90, "1m30s"), (3723.5, "1h2m3.5s"),
    (1.5, "1.5s"), (59.999, "59.999s"), (0.25, "250ms"), (0.0015, "1.5ms"), (1.5e-6, "1.5µs"),
    (1e-9, "1ns"), (-0.5, "-500ms"), (-5400, "-1h30m0s"), (900, "15m0s"),
])
def test_format_duration_is_gos_string(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text


@given(st.integers(min_value=-10**15, max_value=10**15))
def test_format_then_parse_round_trips_to_the_nanosecond(ns: int) -> None:
    assert round(parse_duration(format_duration(ns / 1e9)) * 1e9) == ns


# -- Go's flag syntax ----------------------------------------------------------------------
@pytest.mark.parametrize("argv", [
    ["-count=7"], ["--count=7"], ["-count", "7"], ["--count", "7"],
])
def test_one_or_two_dashes_equals_or_separate_value(argv: list[str]) -> None:
    assert parse(*argv).count == 7


def test_bare_boolean_is_true_and_takes_no_value() -> None:
    cmdline = parse_command_line(["--fast", "false", "--count=3"], Demo)
    # "false" is not the flag's value: it is the first argument, and parsing stops there
    assert cmdline.values == {"fast": True}
    assert cmdline.rest == ["false", "--count=3"]


@pytest.mark.parametrize("spelling,value", [
    ("1", True), ("t", True), ("T", True), ("TRUE", True), ("true", True), ("True", True),
    ("0", False), ("f", False), ("F", False), ("FALSE", False), ("false", False), ("False", False),
])
def test_go_boolean_spellings(spelling: str, value: bool) -> None:
    assert parse(f"--fast={spelling}").fast is value


def test_last_repeated_flag_wins_and_list_flags_accumulate() -> None:
    options = parse("--count=1", "--peer=a:1", "-count", "2", "-peer", "b:2", "--count=3")
    assert options.count == 3
    assert options.peers == ["a:1", "b:2"]


def test_parsing_stops_at_double_dash_and_at_the_first_argument() -> None:
    cmdline = parse_command_line(["--count=1", "--", "--count=2"], Demo)
    assert cmdline.values == {"count": "1"} and cmdline.rest == ["--count=2"]
    cmdline = parse_command_line(["--count=1", "extra", "--count=2"], Demo)
    assert cmdline.values == {"count": "1"} and cmdline.rest == ["extra", "--count=2"]
    cmdline = parse_command_line(["-", "--count=2"], Demo)
    assert cmdline.values == {} and cmdline.rest == ["-", "--count=2"]


def test_deprecated_flags_are_accepted_and_ignored() -> None:
    cmdline = parse_command_line(["--verbose", "--worker-id", "3", "--count=4"], Demo, DEPRECATED)
    assert cmdline.values == {"count": "4"} and cmdline.rest == []


def test_version_help_and_config_are_recognised() -> None:
    cmdline = parse_command_line(["--version", "-config", "/etc/x.toml", "-h"], Demo)
    assert cmdline.show_version and cmdline.show_help
    assert cmdline.config_file == "/etc/x.toml"
    assert parse_command_line(["-config=/a.toml"], Demo).config_file == "/a.toml"


@pytest.mark.parametrize("argv,message", [
    (["--nope=1"], "flag provided but not defined: -nope"),
    (["--count"], "flag needs an argument: -count"),
    (["--fast=yes"], "-fast"),
    (["---count=1"], "bad flag syntax: ---count=1"),
    (["-=1"], "bad flag syntax: -=1"),
    (["--config"], "flag needs an argument: -config"),
])
def test_syntax_errors_name_the_flag(argv: list[str], message: str) -> None:
    with pytest.raises(FlagError) as err:
        parse_command_line(argv, Demo, DEPRECATED)
    assert message in str(err.value) and "\n" not in str(err.value)


# -- precedence and errors -----------------------------------------------------------------
def test_defaults_then_config_then_flags() -> None:
    config = {"count": 10, "name": "from-config", "wait": "5s", "peers": ["c:1"]}
    cmdline = parse_command_line(["--count=20"], Demo)
    options = build_options(Demo, cmdline, config)
    assert options.count == 20                 # flag over config
    assert options.name == "from-config"       # config over default
    assert options.wait == 5.0
    assert options.peers == ["c:1"]
    assert options.fast is False               # default
    assert build_options(Demo, parse_command_line(["--peer=f:1"], Demo), config).peers == ["f:1"]


def test_config_durations_may_be_strings_or_integer_milliseconds() -> None:
    empty = parse_command_line([], Demo)
    assert build_options(Demo, empty, {"wait": "1m"}).wait == 60.0
    assert build_options(Demo, empty, {"wait": 1500}).wait == 1.5


def test_unknown_config_keys_are_reported_not_applied() -> None:
    config = {"count": 2, "colour": "blue", "another": 1}
    assert build_options(Demo, parse_command_line([], Demo), config).count == 2
    assert unknown_config_keys(Demo, config) == ["another", "colour"]


@pytest.mark.parametrize("argv,config,flag", [
    (["--count=many"], {}, "-count"),
    (["--count=101"], {}, "-count"),
    (["--wait=soon"], {}, "-wait"),
    ([], {"count": "many"}, "-count"),
    ([], {"wait": True}, "-wait"),
    (["--peer=x"], {"count": -1}, "-count"),
])
def test_bad_values_are_one_line_naming_the_flag(argv: list[str], config: dict, flag: str) -> None:
    with pytest.raises(FlagError) as err:
        build_options(Demo, parse_command_line(argv, Demo), config)
    text = str(err.value)
    assert f"flag {flag}:" in text and "\n" not in text


def test_usage_lists_flags_with_go_style_defaults() -> None:
    text = usage(Demo, "demo")
    assert text.splitlines()[0] == "Usage of demo:"
    assert "  -count int" in text and "(default 1)" in text
    assert "  -wait duration" in text and "(default 2s)" in text
    assert "  -peer value" in text
    assert "  -fast\n" in text + "\n"
