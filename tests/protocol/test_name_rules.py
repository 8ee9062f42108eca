"""Topic and channel names: 1..64 of [.a-zA-Z0-9_-], optionally ending #ephemeral."""
from __future__ import annotations

import string

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nsq_protocol.names import is_ephemeral, is_valid_channel_name, is_valid_topic_name
from tests.protocol.protocol_strategies import NAME_ALPHABET, names

RULES = [is_valid_topic_name, is_valid_channel_name]

VALID = [
    "a",
    "x" * 64,
    "Az09._-",
    ".",
    "-",
    "_",
    "a#ephemeral",
    "x" * 54 + "#ephemeral",  # the suffix counts towards the 64
    "topic.with.dots",
]
INVALID = [
    "",
    "x" * 65,
    "x" * 55 + "#ephemeral",
    "#ephemeral",  # the suffix needs a name in front of it
    "a#ephemeralx",
    "a#ephemeral#ephemeral",
    "a#Ephemeral",
    "a#",
    "#",
    "bad$name",
    "sp ace",
    "sp\tace",
    "slash/name",
    "colon:name",
    "caf\u00e9",
    "trailing\n",
    "\nleading",
    "a\x00b",
    "\u0661",  # a non-ASCII digit
]


@pytest.mark.parametrize("rule", RULES)
@pytest.mark.parametrize("name", VALID)
def test_valid_names(rule, name: str) -> None:
    assert rule(name) is True
    assert rule(name.encode()) is True


@pytest.mark.parametrize("rule", RULES)
@pytest.mark.parametrize("name", INVALID)
def test_invalid_names(rule, name: str) -> None:
    assert rule(name) is False
    assert rule(name.encode("utf-8")) is False


@pytest.mark.parametrize("rule", RULES)
def test_non_ascii_bytes_are_invalid_not_an_error(rule) -> None:
    assert rule(b"\xff\xfe") is False
    assert rule(b"ok\x80") is False


def test_is_ephemeral() -> None:
    assert is_ephemeral("a#ephemeral")
    assert not is_ephemeral("a")
    assert not is_ephemeral("ephemeral")
    assert not is_ephemeral("a#ephemeralx")


@settings(max_examples=300, deadline=None)
@given(names())
def test_generated_valid_names_are_accepted(name: str) -> None:
    assert is_valid_topic_name(name) and is_valid_channel_name(name)
    assert is_ephemeral(name) == name.endswith("#ephemeral")


FORBIDDEN = st.characters(
    exclude_characters=NAME_ALPHABET, exclude_categories=("Cs",))


@settings(max_examples=300, deadline=None)
@given(st.text(NAME_ALPHABET, min_size=0, max_size=30), FORBIDDEN,
       st.text(NAME_ALPHABET, min_size=0, max_size=30))
def test_any_character_outside_the_alphabet_is_refused(head: str, bad: str, tail: str) -> None:
    name = head + bad + tail
    if name.endswith("#ephemeral") and bad == "#" and tail == "ephemeral":
        return  # the one place a '#' is allowed
    assert not is_valid_topic_name(name)
    assert not is_valid_channel_name(name)


@settings(max_examples=100, deadline=None)
@given(st.text(NAME_ALPHABET, min_size=65, max_size=120))
def test_longer_than_64_is_refused(name: str) -> None:
    assert not is_valid_topic_name(name)


def test_alphabet_is_exactly_letters_digits_dot_underscore_dash() -> None:
    accepted = {c for c in map(chr, range(128)) if is_valid_topic_name(c)}
    assert accepted == set(string.ascii_letters + string.digits + "._-")
