"""What users see of the client's classes: no connection callbacks among their methods
(calling a consumer's on_message from outside would count a message it never got)."""
from __future__ import annotations

import pytest

from nsq_client import Consumer, Producer, ProducerPool


@pytest.mark.parametrize("cls", [Consumer, Producer, ProducerPool], ids=lambda c: c.__name__)
def test_no_connection_callback_is_public(cls: type) -> None:
    assert [name for name in dir(cls) if name.startswith("on_")] == []
