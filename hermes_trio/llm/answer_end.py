"""When a streamed Chat Completions answer that said it finished is over.

A ``finish_reason`` says the model server is probably done, not that the
stream is. Most servers then send the usage chunk (when asked for it) and
``data: [DONE]`` at once; some hold the connection open without them; some
proxies put a finish_reason on every chunk, or on a reasoning chunk before
the answer. So after a finish_reason the stream is read on as usual (any
text, reasoning or tool call is more of the answer), and only silence ends
the answer, as a complete one:

- after a chunk that carried nothing but the stream's first finish_reason:
  a short grace, :data:`USAGE_GRACE` for a usage chunk that was asked for
  and has not come, else :data:`DRAIN_GRACE`;
- after a usage chunk that followed the finish_reason: :data:`DRAIN_GRACE`;
- after a finish_reason that came with some of the answer, or once the
  answer went on after one: the idle limit, as for any pause in an answer
  (such a server may send its next token in a few seconds).
"""

from __future__ import annotations

__all__ = ["DRAIN_GRACE", "USAGE_GRACE", "AnswerEnd"]

#: Silence after the finish_reason that ends an answer still owed its usage.
USAGE_GRACE = 2.0
#: Silence that ends an answer with nothing more owed (the body's end, [DONE]).
DRAIN_GRACE = 0.05


class AnswerEnd:
    """Follows one stream's finish_reasons; :meth:`grace` says how much
    silence ends the answer.

    The reader calls :meth:`finish` for each chunk with a finish_reason,
    and, once one came, :meth:`more` for each chunk with some of the answer
    and :meth:`usage` for each other chunk after the usage is known.
    """

    __slots__ = ("doubted", "finishing", "plain", "said", "usage_after", "usage_known", "wants")

    def __init__(self, *, wants_usage: bool) -> None:
        self.wants = wants_usage
        #: A finish_reason has come.
        self.said = False
        #: The last of the answer was a finish_reason.
        self.finishing = False
        #: That finish_reason came on a chunk with nothing else in it.
        self.plain = False
        #: The answer went on after a finish_reason: later ones are doubted too.
        self.doubted = False
        self.usage_known = False
        #: A chunk without any answer came after the finish_reason, with the usage known.
        self.usage_after = False

    def finish(self, *, with_answer: bool, usage_known: bool) -> None:
        self.said = True
        self.finishing = True
        self.plain = not with_answer
        self.usage_known = usage_known
        self.usage_after = False

    def more(self) -> None:
        """Some of the answer came after a finish_reason."""
        self.finishing = False
        self.doubted = True

    def usage(self) -> None:
        """A chunk without any answer came after the finish_reason, the usage known."""
        if self.finishing:
            self.usage_after = True

    @property
    def owes_usage(self) -> bool:
        """The answer looks final but the usage that was asked for has not come."""
        return (
            self.finishing
            and self.plain
            and not self.doubted
            and self.wants
            and not (self.usage_known or self.usage_after)
        )

    def grace(self, idle: float) -> float | None:
        """Seconds of silence that end the answer as complete; None before
        any finish_reason (then silence is the watchdog's to judge)."""
        if not self.said:
            return None
        if self.finishing and self.usage_after:
            return DRAIN_GRACE
        if self.finishing and self.plain and not self.doubted:
            return USAGE_GRACE if self.owes_usage else DRAIN_GRACE
        return idle
