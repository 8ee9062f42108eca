"""FIN, REQ and TOUCH name a message by 16 bytes the client chooses. IDs that are not text
(not even UTF-8) are answered like any other ID not in flight: a non-fatal
E_FIN_FAILED / E_REQ_FAILED / E_TOUCH_FAILED, and the connection carries on."""
from __future__ import annotations

from typing import Callable

import pytest

from nsq_protocol import commands
from tests.broker.conftest import Connect
from tests.broker.wire import WireConn
from tests.servers import Nsqd

Consumer = Callable[..., WireConn]

NOT_UTF8_IDS = [b"\xff" * 16, b"\x80" * 16, b"0123456789abcd\xc3\x28"]
NOT_IN_FLIGHT = b" failed ID not in flight"


def _new_log(server: Nsqd, since: int) -> str:
    with open(server.log_path, "rb") as f:
        f.seek(since)
        return f.read().decode("utf-8", "replace")


@pytest.mark.parametrize("bad_id", NOT_UTF8_IDS, ids=["ff", "80", "broken-utf8"])
def test_fin_req_touch_of_a_non_utf8_id_fail_without_closing(
        nsqd: Nsqd, connect: Connect, consumer: Consumer, topic: str, bad_id: bytes) -> None:
    log_start = nsqd.log_path.stat().st_size
    publisher = connect(nsqd)
    publisher.mpub(topic, [b"first", b"second"])
    publisher.expect_ok()
    conn = consumer(nsqd, topic, "ch", rdy=3)
    held = conn.read_messages(2)

    for send, code, label in ((conn.fin, "E_FIN_FAILED", b"FIN"),
                              (lambda i: conn.req(i, 0), "E_REQ_FAILED", b"REQ"),
                              (conn.touch, "E_TOUCH_FAILED", b"TOUCH")):
        send(bad_id)
        frame = conn.expect_error(code)
        assert frame.data.startswith(code.encode() + b" " + label + b" "), frame
        assert frame.data.endswith(NOT_IN_FLIGHT), frame

    # a bad FIN between two good ones, in one write: only it fails
    conn.send(commands.fin(held[0].id) + commands.fin(bad_id) + commands.fin(held[1].id))
    conn.expect_error("E_FIN_FAILED")

    # the connection still answers, publishes, and delivers
    conn.nop()
    conn.pub(topic, b"still open")
    conn.expect_ok()
    assert conn.read_message().body == b"still open"
    stats = nsqd.channel(topic, "ch")
    assert stats is not None
    (client,) = stats["clients"]
    assert client["finish_count"] == 2
    assert "Traceback" not in _new_log(nsqd, log_start)
