"""ProtocolError: NSQ's error codes as values, and which of them close the connection."""
from __future__ import annotations

import pytest

from nsq_protocol import errors
from nsq_protocol.errors import ProtocolError

ALL_CODES = sorted(value for name, value in vars(errors).items() if name.startswith("E_"))
NON_FATAL = ["E_FIN_FAILED", "E_REQ_FAILED", "E_TOUCH_FAILED"]


def test_every_code_constant_is_spelled_as_on_the_wire() -> None:
    for name, value in vars(errors).items():
        if name.startswith("E_"):
            assert value == name
    assert {"E_INVALID", "E_BAD_PROTOCOL", "E_BAD_BODY", "E_BAD_TOPIC", "E_BAD_CHANNEL",
            "E_BAD_MESSAGE", "E_PUB_FAILED", "E_MPUB_FAILED", "E_DPUB_FAILED", "E_FIN_FAILED",
            "E_REQ_FAILED", "E_TOUCH_FAILED", "E_AUTH_FAILED", "E_AUTH_FIRST",
            "E_AUTH_DISABLED", "E_UNAUTHORIZED", "E_IDENTIFY_FAILED"} <= set(ALL_CODES)


def test_wire_text_is_code_space_description() -> None:
    err = ProtocolError("E_BAD_TOPIC", "PUB topic name 'a$' is not valid")
    assert err.code == "E_BAD_TOPIC"
    assert err.message == "PUB topic name 'a$' is not valid"
    assert err.wire_text == b"E_BAD_TOPIC PUB topic name 'a$' is not valid"
    assert str(err) == "E_BAD_TOPIC PUB topic name 'a$' is not valid"


def test_wire_text_without_description_is_the_code_alone() -> None:
    assert ProtocolError("E_INVALID").wire_text == b"E_INVALID"


def test_wire_text_is_utf8() -> None:
    assert ProtocolError("E_INVALID", "bad \u00e9").wire_text == b"E_INVALID bad \xc3\xa9"


@pytest.mark.parametrize("code", NON_FATAL)
def test_fin_req_touch_failures_keep_the_connection(code: str) -> None:
    assert ProtocolError(code, "x").fatal is False


@pytest.mark.parametrize("code", [c for c in ALL_CODES if c not in NON_FATAL])
def test_every_other_code_closes_the_connection(code: str) -> None:
    assert ProtocolError(code, "x").fatal is True


def test_fatality_can_be_forced_either_way() -> None:
    assert ProtocolError("E_FIN_FAILED", fatal=True).fatal is True
    assert ProtocolError("E_INVALID", fatal=False).fatal is False


def test_is_an_exception_that_can_be_raised_and_caught() -> None:
    with pytest.raises(ProtocolError) as caught:
        raise ProtocolError("E_BAD_BODY", "nope")
    assert caught.value.code == "E_BAD_BODY"
