"""Query strings accepted and refused as Go's ``url.ParseQuery`` does for NSQ's HTTP APIs."""
from __future__ import annotations

from urllib.parse import urlencode

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nsq_protocol.http_query import QueryError, first, parse_query


@pytest.mark.parametrize("query,expected", [
    ("", {}),
    ("topic=a", {"topic": ["a"]}),
    ("topic=a&topic=b", {"topic": ["a", "b"]}),
    ("a=1&&b=2&", {"a": ["1"], "b": ["2"]}),
    ("flag", {"flag": [""]}),
    ("flag=", {"flag": [""]}),
    ("=v", {"": ["v"]}),
    ("t=a+b", {"t": ["a b"]}),
    ("t=%41%2b%2B", {"t": ["A++"]}),
    ("t%6fpic=x", {"topic": ["x"]}),
    ("t=a=b", {"t": ["a=b"]}),
    ("t=%C3%A9", {"t": ["é"]}),
])
def test_well_formed_queries(query: str, expected: dict[str, list[str]]) -> None:
    assert parse_query(query) == expected


@pytest.mark.parametrize("query", ["t=%zz", "t=%4", "t=%", "%=1", "t=100%", "t=%%41", "a=1;b=2", "a=1&b;=2"])
def test_malformed_queries_are_refused(query: str) -> None:
    with pytest.raises(QueryError):
        parse_query(query)


def test_a_malformed_pair_anywhere_refuses_the_whole_query() -> None:
    with pytest.raises(QueryError, match="semicolon"):
        parse_query("topic=ok&a;b&c=%41")
    with pytest.raises(QueryError, match="escape"):
        parse_query("x=%zz&topic=ok")


def test_first_is_the_first_value_or_none() -> None:
    values = parse_query("t=a&t=b&empty=")
    assert first(values, "t") == "a"
    assert first(values, "empty") == ""
    assert first(values, "missing") is None


@given(st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=40))
def test_any_text_parses_or_is_refused_with_a_query_error(query: str) -> None:
    try:
        parsed = parse_query(query)
    except QueryError:
        return
    assert all(isinstance(v, list) and v for v in parsed.values())


@given(st.dictionaries(st.text(min_size=1, max_size=10), st.text(max_size=10), max_size=5))
def test_values_escaped_like_a_browser_come_back_unchanged(pairs: dict[str, str]) -> None:
    assert {k: v[0] for k, v in parse_query(urlencode(pairs)).items()} == pairs
