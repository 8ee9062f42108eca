"""The exceptions the client raises; each says what failed and, from nsqd, with which code."""
from __future__ import annotations


class NsqClientError(Exception):
    """Base of every error this package raises."""


class ConnectionClosedError(NsqClientError):
    """The connection to nsqd ended before the command was answered."""


class NotConnectedError(NsqClientError):
    """A command needs a connection that is not established (or no longer is)."""


class ProducerStoppedError(NsqClientError):
    """The producer was stopped before nsqd answered this publish."""


class ServerError(NsqClientError):
    """nsqd answered a command with an error frame (``E_BAD_TOPIC ...``)."""

    def __init__(self, code: str, text: str) -> None:
        super().__init__(text)
        self.code = code
        self.text = text


class IdentifyError(NsqClientError):
    """The connection could not be set up (IDENTIFY, TLS, compression or AUTH failed)."""


class PublishError(NsqClientError):
    """A publish through a pool failed on every node it was tried on; ``causes`` maps
    each node's address to its error."""

    def __init__(self, message: str, causes: dict[str, BaseException]) -> None:
        detail = "; ".join(f"{addr}: {err!r}" for addr, err in causes.items())
        super().__init__(f"{message} ({detail})" if detail else message)
        self.causes = causes


class AdminError(NsqClientError):
    """An nsqd/nsqlookupd HTTP API call answered with an error status."""

    def __init__(self, status: int, message: str, url: str) -> None:
        super().__init__(f"{url}: HTTP {status} {message}")
        self.status = status
        self.message = message
        self.url = url
