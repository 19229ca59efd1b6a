"""How a turn ended, as types mypy checks: the finish reason, the error
code and the cancel cause.

They are three different kinds of value, so they get three shapes:

- :data:`FinishReason` is a closed set the project alone writes, and users
  compare and construct it as text (``end.finish_reason == "stop"``,
  ``TurnFinished("hi", finish_reason="length")``): a ``Literal``, so every
  such comparison is checked (``mypy --strict`` enables
  ``--strict-equality``: ``reason == "stopp"`` is an error).
- :class:`ErrorCode` is the project's own codes, but the field that holds
  one (``TurnFinished.error_code``, ``ModelError.code``) may hold the model
  server's own code instead: a request the model server refused reaches
  the client with the model server's words and code, as if it had asked
  the model server itself. A ``Literal`` would widen to ``str`` in that
  field and check nothing, so the project's codes are a ``StrEnum``:
  code compares with its members (``code == ErrorCode.MODEL_TIMEOUT``; a
  misspelt member is an error), the values are the strings the wire always
  carried, and :meth:`ErrorCode.of` says which of ours a code is (None for
  the model server's own). ``tests/core/test_endings.py`` keeps string
  comparisons of codes out of the package.
- :class:`CancelCause` is why a turn was cancelled, for code that decides
  on it (the metrics' ``client_gone``). The words a person reads ("client
  went away", "interrupted by a new message") travel beside it as
  ``Turn.interrupted``; :attr:`CancelCause.words` is each cause's default.

The wire encoders write these values into JSON as they are: each is a
``str``.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

__all__ = ["CancelCause", "ErrorCode", "FinishReason"]

FinishReason = Literal["stop", "length", "tool_calls", "approval", "interrupted", "error"]
"""How a turn ended: ``stop`` (answered), ``length`` (the model hit its
token limit), ``tool_calls`` (client-side tools were called and wait for
the client), ``approval`` (calls wait for a person's answer in a later
request), ``interrupted`` (cancelled) or ``error`` (see the error code)."""


class ErrorCode(StrEnum):
    """The project's own codes for a turn (or a model request) that failed."""

    MODEL_UNREACHABLE = "model_unreachable"
    """The model server could not be reached (connect, TLS, reset)."""
    MODEL_TIMEOUT = "model_timeout"
    """The model server was too slow (first token, idle, total): HTTP 504."""
    MODEL_ERROR = "model_error"
    """The model server failed or answered what cannot be read: HTTP 502."""
    INTERNAL_ERROR = "internal_error"
    """The turn crashed: a bug, not a model failure (HTTP 500)."""
    CONTEXT_LENGTH_EXCEEDED = "context_length_exceeded"
    """The conversation does not fit the model's window, even compacted."""
    TIMEOUT = "timeout"
    """A summary for compaction took longer than its limit."""

    @classmethod
    def of(cls, code: str | None) -> ErrorCode | None:
        """``code`` as one of ours, or None (no code, or the model server's own)."""
        if code is None:
            return None
        try:
            return cls(code)
        except ValueError:
            return None


class CancelCause(StrEnum):
    """Why a turn was cancelled."""

    INTERRUPTED = "interrupted"
    """Someone asked it to stop: a person (Ctrl-C, ``/stop``, a new
    message), a client (cancel, delete, a newer request on the session)."""
    CLIENT_GONE = "client_gone"
    """The client that would read the answer went away."""
    TIMEOUT = "timeout"
    """It ran longer than it was given."""
    SHUTDOWN = "shutdown"
    """The process is stopping."""

    @property
    def words(self) -> str:
        """What a person reads when nothing more precise was said."""
        return _WORDS[self]


_WORDS = {
    CancelCause.INTERRUPTED: "cancelled",
    CancelCause.CLIENT_GONE: "client went away",
    CancelCause.TIMEOUT: "took too long",
    CancelCause.SHUTDOWN: "the server is shutting down",
}
