"""NSQ's error codes, and the one exception type that carries them."""
from __future__ import annotations

E_INVALID = "E_INVALID"
E_BAD_PROTOCOL = "E_BAD_PROTOCOL"
E_BAD_BODY = "E_BAD_BODY"
E_BAD_TOPIC = "E_BAD_TOPIC"
E_BAD_CHANNEL = "E_BAD_CHANNEL"
E_BAD_MESSAGE = "E_BAD_MESSAGE"
E_PUB_FAILED = "E_PUB_FAILED"
E_MPUB_FAILED = "E_MPUB_FAILED"
E_DPUB_FAILED = "E_DPUB_FAILED"
E_FIN_FAILED = "E_FIN_FAILED"
E_REQ_FAILED = "E_REQ_FAILED"
E_TOUCH_FAILED = "E_TOUCH_FAILED"
E_AUTH_FAILED = "E_AUTH_FAILED"
E_AUTH_FIRST = "E_AUTH_FIRST"
E_AUTH_DISABLED = "E_AUTH_DISABLED"
E_UNAUTHORIZED = "E_UNAUTHORIZED"
E_IDENTIFY_FAILED = "E_IDENTIFY_FAILED"
E_SUB_FAILED = "E_SUB_FAILED"

# nsqd keeps the connection open after these; every other error closes it.
NON_FATAL_CODES = frozenset({E_FIN_FAILED, E_REQ_FAILED, E_TOUCH_FAILED})


class ProtocolError(Exception):
    """Bad input at the protocol edge, with NSQ's code (``E_BAD_TOPIC`` ...).

    ``fatal`` says whether nsqd closes the connection after sending the error frame.
    """

    def __init__(self, code: str, message: str = "", fatal: bool | None = None) -> None:
        super().__init__(f"{code} {message}".strip())
        self.code = code
        self.message = message
        self.fatal = code not in NON_FATAL_CODES if fatal is None else fatal

    @property
    def wire_text(self) -> bytes:
        """The error frame's payload: ``CODE description``; client bytes that are not
        UTF-8 (kept by ``gotext.raw``) go back out as they came, as Go's nsqd sends them."""
        try:
            return str(self).encode("utf-8", "surrogateescape")
        except UnicodeEncodeError:
            return str(self).encode("utf-8", "replace")
