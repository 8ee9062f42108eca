"""A message delivered to a consumer, and the three answers it can get: FIN, REQ, TOUCH."""
from __future__ import annotations

from typing import Protocol

from nsq_protocol.message import WireMessage


class MessageResponder(Protocol):
    """Who carries a message's answer back to the nsqd it came from (its connection)."""

    def finish(self, message: "Message") -> None: ...
    def requeue(self, message: "Message", delay: float | None, backoff: bool) -> None: ...
    def touch(self, message: "Message") -> None: ...


class MessageAlreadyAnsweredError(RuntimeError):
    """finish() or requeue() on a message that was already finished or requeued."""


class Message:
    """One delivery. ``id`` is nsqd's 16-byte ID (ASCII hex), ``timestamp`` nanoseconds
    since the epoch, ``attempts`` how many times nsqd has delivered it (1 the first time).

    Handlers answer by returning (FIN) or raising (REQ with backoff) unless they call
    :meth:`disable_auto_response` and answer later themselves.
    """

    __slots__ = ("id", "body", "timestamp", "attempts", "nsqd_address", "_responder",
                 "_responded", "_auto_response")

    def __init__(self, wire: WireMessage, nsqd_address: str, responder: MessageResponder) -> None:
        self.id: bytes = wire.id
        self.body: bytes = wire.body
        self.timestamp: int = wire.timestamp
        self.attempts: int = wire.attempts
        self.nsqd_address = nsqd_address
        self._responder = responder
        self._responded = False
        self._auto_response = True

    def __repr__(self) -> str:
        return f"Message(id={self.id.decode('ascii', 'replace')}, attempts={self.attempts}, " \
               f"nsqd={self.nsqd_address}, body={len(self.body)} bytes)"

    @property
    def has_responded(self) -> bool:
        """Whether the message was answered (finished or requeued)."""
        return self._responded

    @property
    def is_auto_response_disabled(self) -> bool:
        """Whether :meth:`disable_auto_response` was called."""
        return not self._auto_response

    def disable_auto_response(self) -> None:
        """The handler's return or raise will not answer this message; the caller will."""
        self._auto_response = False

    def finish(self) -> None:
        """FIN: processed, nsqd forgets it."""
        self._mark_responded()
        self._responder.finish(self)

    def requeue(self, delay: float | None = None, backoff: bool = True) -> None:
        """REQ: deliver again after ``delay`` seconds (default: ``default_requeue_delay``
        times attempts), never more than ``max_requeue_delay`` (nsqd would drop the
        connection over a delay above its own maximum). ``backoff`` tells the consumer to
        slow down as for a failed message; ``False`` requeues without that signal."""
        if delay is not None and delay < 0:
            raise ValueError(f"requeue delay must be >= 0, got {delay}")
        self._mark_responded()
        self._responder.requeue(self, delay, backoff)

    def touch(self) -> None:
        """TOUCH: reset nsqd's timeout for this in-flight message."""
        if not self._responded:
            self._responder.touch(self)

    def _mark_responded(self) -> None:
        if self._responded:
            raise MessageAlreadyAnsweredError(f"message {self.id.decode('ascii', 'replace')} was already answered")
        self._responded = True
