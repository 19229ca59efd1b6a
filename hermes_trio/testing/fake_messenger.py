"""An in-memory chat for testing code that talks to a ``Messenger``.

``FakeMessenger`` behaves like a strict platform: it enforces the length
limit, rejects empty text and edits on platforms that cannot edit, answers an
identical edit with "not modified" (success, as for Telegram), and can answer
429 or fail on a schedule. Every call is recorded with ``trio.current_time()``
so tests under ``MockClock`` can assert exact timings::

    messenger = FakeMessenger(Capabilities(can_edit=True, max_length=4096,
                                           length_unit="utf16"))
    ...
    assert messenger.visible() == ["the answer"]
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Literal, NoReturn

import trio

from hermes_trio.consumers.messenger import (
    Capabilities,
    DraftRefused,
    PlatformError,
    RateLimited,
    measure,
)

__all__ = ["FakeCall", "FakeMessenger"]

CallKind = Literal["send", "edit", "delete", "typing", "draft"]
Outcome = Literal["ok", "not_modified", "rate_limited", "error"]

TELEGRAM = Capabilities(can_edit=True, max_length=4096, length_unit="utf16")


@dataclass(frozen=True, slots=True)
class FakeCall:
    """One call as the platform saw it. ``time`` is when it arrived."""

    kind: CallKind
    time: float
    message_id: str | None = None
    text: str | None = None
    outcome: Outcome = "ok"
    error: str | None = None
    final: bool = False
    """An edit the editor said is its last (``edit(..., final=True)``)."""


class FakeMessenger:
    """A ``Messenger`` for one chat, kept in memory.

    - ``rate_limit_after``: after this many accepted message calls, the next
      one gets a 429 (once).
    - ``rate_limit_at``: indices (0-based, over send/edit/delete calls,
      counting refused ones) answered with a 429.
    - ``retry_after``: the 429's ``retry_after``. Like a real platform, every
      call during the pause is refused again with the remaining time.
    - ``fail_at``: message-call indices answered with ``PlatformError``.
    - ``fail_when(kind, text)``: refuse any call for which it returns True.
    - ``latency``: seconds each call takes (on the trio clock).
    - ``refuse_drafts``: with ``Capabilities(drafts=True)``, every ``draft``
      is refused with ``DraftRefused`` (a chat that cannot have drafts).

    With ``Capabilities(drafts=True)`` it is a ``DraftMessenger``: ``draft``
    calls count as message calls (for ``rate_limit_at`` and ``fail_at``)
    and ``drafts`` keeps every draft text accepted.
    """

    def __init__(
        self,
        capabilities: Capabilities = TELEGRAM,
        *,
        rate_limit_after: int | None = None,
        rate_limit_at: Collection[int] = (),
        retry_after: float = 3.0,
        fail_at: Collection[int] = (),
        fail_when: Callable[[CallKind, str | None], bool] | None = None,
        latency: float = 0.0,
        refuse_drafts: bool = False,
    ) -> None:
        self._capabilities = capabilities
        self.rate_limit_after = rate_limit_after
        self.rate_limit_at = set(rate_limit_at)
        self.retry_after = retry_after
        self.fail_at = set(fail_at)
        self.fail_when = fail_when
        self.latency = latency
        self.refuse_drafts = refuse_drafts
        self.drafts: list[str] = []
        """Every draft text accepted, in order."""
        self.calls: list[FakeCall] = []
        self.messages: dict[str, str] = {}
        """Current text of every message that exists, in send order."""
        self.history: dict[str, list[str]] = {}
        """Every text each message has shown, including deleted messages."""
        self._next_id = 1
        self._message_calls = 0
        self._accepted = 0
        self._rate_limited_once = False
        self._paused_until = -float("inf")

    @property
    def capabilities(self) -> Capabilities:
        return self._capabilities

    # ------------------------------------------------------------- protocol

    async def send(self, text: str) -> str:
        await self._arrive()
        self._check("send", None, text)
        message_id = str(self._next_id)
        self._next_id += 1
        self.messages[message_id] = text
        self.history[message_id] = [text]
        self._record("send", message_id, text)
        return message_id

    async def edit(self, message_id: str, text: str, *, final: bool = False) -> None:
        await self._arrive()
        self._check("edit", message_id, text)
        if self.messages[message_id] == text:
            self._record("edit", message_id, text, "not_modified", final=final)
            return
        self.messages[message_id] = text
        self.history[message_id].append(text)
        self._record("edit", message_id, text, final=final)

    async def delete(self, message_id: str) -> None:
        await self._arrive()
        self._check("delete", message_id, None)
        del self.messages[message_id]
        self._record("delete", message_id, None)

    async def draft(self, text: str) -> None:
        await self._arrive()
        if self.refuse_drafts or not self._capabilities.drafts:
            why = "drafts are not available in this chat"
            self.calls.append(FakeCall("draft", trio.current_time(), None, text, "error", why))
            raise DraftRefused(why)
        self._check("draft", None, text)
        self.drafts.append(text)
        self._record("draft", None, text)

    async def typing(self) -> None:
        await self._arrive()
        now = trio.current_time()
        if now < self._paused_until:
            self._refuse_paused("typing", None, None, now)
        self.calls.append(FakeCall("typing", now))

    # -------------------------------------------------------------- queries

    def visible(self) -> list[str]:
        """The texts of the chat's messages, in order."""
        return list(self.messages.values())

    def message_calls(self, kind: CallKind | None = None) -> list[FakeCall]:
        """Calls other than typing (or only ``kind``), in order."""
        wanted = {kind} if kind else {"send", "edit", "delete"}
        return [c for c in self.calls if c.kind in wanted]

    def accepted(self, kind: CallKind | None = None) -> list[FakeCall]:
        """Message calls that changed the chat."""
        return [c for c in self.message_calls(kind) if c.outcome == "ok"]

    # ------------------------------------------------------------ internals

    async def _arrive(self) -> None:
        # Time passes before the platform sees the call, like a network hop.
        if self.latency > 0:
            await trio.sleep(self.latency)
        else:
            await trio.lowlevel.checkpoint()

    def _check(self, kind: CallKind, message_id: str | None, text: str | None) -> None:
        now = trio.current_time()
        index = self._message_calls
        self._message_calls += 1
        if now < self._paused_until:
            self._refuse_paused(kind, message_id, text, now)
        due_once = (
            self.rate_limit_after is not None
            and not self._rate_limited_once
            and self._accepted >= self.rate_limit_after
        )
        if index in self.rate_limit_at or due_once:
            self._rate_limited_once = self._rate_limited_once or due_once
            self._paused_until = now + self.retry_after
            self._refuse_paused(kind, message_id, text, now)
        if index in self.fail_at or (self.fail_when is not None and self.fail_when(kind, text)):
            self._refuse(kind, message_id, text, "scheduled failure")
        if kind == "edit" and not self._capabilities.can_edit:
            self._refuse(kind, message_id, text, "this platform cannot edit messages")
        if kind == "delete" and not self._capabilities.can_delete:
            self._refuse(kind, message_id, text, "this platform cannot delete messages")
        if kind not in ("send", "draft") and message_id not in self.messages:
            self._refuse(kind, message_id, text, f"message {message_id} not found")
        if text is not None:
            if not text.strip() and kind != "draft":  # an empty draft is a placeholder
                self._refuse(kind, message_id, text, "message text is empty")
            length = measure(text, self._capabilities.length_unit)
            if length > self._capabilities.max_length:
                self._refuse(
                    kind,
                    message_id,
                    text,
                    f"message is too long ({length} > {self._capabilities.max_length})",
                )
        self._accepted += 1

    def _refuse_paused(
        self, kind: CallKind, message_id: str | None, text: str | None, now: float
    ) -> NoReturn:
        self.calls.append(FakeCall(kind, now, message_id, text, "rate_limited"))
        raise RateLimited(self._paused_until - now, "too many requests")

    def _refuse(
        self, kind: CallKind, message_id: str | None, text: str | None, why: str
    ) -> NoReturn:
        self.calls.append(FakeCall(kind, trio.current_time(), message_id, text, "error", why))
        raise PlatformError(why)

    def _record(
        self,
        kind: CallKind,
        message_id: str | None,
        text: str | None,
        outcome: Outcome = "ok",
        *,
        final: bool = False,
    ) -> None:
        self.calls.append(
            FakeCall(kind, trio.current_time(), message_id, text, outcome, final=final)
        )
