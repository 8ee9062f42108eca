"""The client's documentation lives in its code: every public class and function has a
docstring of its own, so do the methods people call on the producers, the consumer and
a message, and every Config option has a description (its docstring)."""
from __future__ import annotations

import inspect

import pytest

import nsq_client
from nsq_client import Config, Consumer, Message, Producer, ProducerPool

PUBLIC = [getattr(nsq_client, name) for name in nsq_client.__all__ if not name.startswith("__")]


@pytest.mark.parametrize("value", [v for v in PUBLIC if inspect.isclass(v) or inspect.isfunction(v)],
                         ids=lambda v: v.__name__)
def test_every_public_class_and_function_says_what_it_is(value: object) -> None:
    doc = vars(value).get("__doc__") if inspect.isclass(value) else getattr(value, "__doc__", None)
    assert doc and doc.strip(), f"{value!r} has no docstring of its own"


@pytest.mark.parametrize("cls", [Producer, ProducerPool, Consumer, Message], ids=lambda c: c.__name__)
def test_every_method_people_call_says_what_it_does(cls: type) -> None:
    # on_*: the ConnectionDelegate callbacks a Connection calls, not the user's API
    undocumented = [name for name, member in vars(cls).items()
                    if not name.startswith(("_", "on_")) and (inspect.isfunction(member) or isinstance(member, property))
                    and not (member.__doc__ or "").strip()]
    assert not undocumented, f"{cls.__name__}: {undocumented}"


@pytest.mark.parametrize("name", sorted(Config.model_fields))
def test_every_config_option_has_a_description(name: str) -> None:
    description = Config.model_fields[name].description
    assert description and len(description.split()) >= 3, name
