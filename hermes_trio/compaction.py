"""Compaction between model calls: the trio shell over :mod:`.wire.context`.

A turn asks :meth:`ContextKeeper.fit` before each model request. When the
request would pass ``compaction.threshold`` of the window, the older part
of the conversation is replaced by one summary the model writes in
separate, non-streamed requests (in pieces when that part is itself larger
than the window), under ``compaction.summary_timeout``. The conversation
list changes only once the summary is in hand, with no checkpoint after:
a turn cancelled while the summary is written (an interrupt, a client gone)
leaves it exactly as it was. A summary that fails or times out drops the
oldest whole exchanges instead, and the event says so: a conversation is
never left unable to go on.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

import trio

from . import metrics
from .config import Config
from .endings import ErrorCode
from .events import ContextCompacted
from .llm import ModelClient, ModelError, ModelRequest
from .recording.document import RecordedContext
from .wire.context import (
    Calibration,
    ContextPolicy,
    Overflow,
    choose_cut,
    drop_oldest,
    exchange_starts,
    is_summary,
    message_tokens,
    schemas_tokens,
    summary_message,
    summary_pieces,
    summary_request,
)
from .wire.messages import ChatTool, Message
from .wire.think import ThinkFilter

__all__ = ["ContextKeeper", "ContextTooLarge", "summarize", "summary_tokens"]

log = logging.getLogger("hermes_trio.compaction")

# Room the summary request's own instructions take, in tokens.
_INSTRUCTION_TOKENS = 300
# What a summary request's transcript may fill of the window, at most.
_SUMMARY_INPUT_SHARE = 0.8
_TRUNCATED_NOTE = (
    "(The earlier part of this conversation was dropped to stay within the model's "
    "context; no summary of it could be made.)"
)


class ContextTooLarge(ModelError):
    """The newest message alone does not fit the model's window."""


async def _ignore(_delta: object) -> None:
    pass


@dataclass
class _Sizes:
    head: int
    messages: list[int]

    @property
    def total(self) -> int:
        return self.head + sum(self.messages)


async def summarize(
    client: ModelClient,
    config: Config,
    folded: Sequence[Message],
    *,
    window: int,
    ratio: float = 1.0,
    model: str | None = None,
) -> str:
    """The model's summary of ``folded``: one request per piece that fits
    the window, each folding the summary of the pieces before it. Raises
    :class:`ModelError` when the model server fails; has no timeout of its
    own."""
    longest = summary_tokens(config, window)
    # Tokens of transcript one request may carry, in the estimate's units.
    room = window * _SUMMARY_INPUT_SHARE - longest - _INSTRUCTION_TOKENS
    budget = int(room / ratio)
    budget = max(budget, 64)
    sizes = [message_tokens(m) for m in folded]
    previous: str | None = None
    for piece in summary_pieces(folded, sizes, budget=budget):
        messages = summary_request(piece, previous, max_chars=budget * 4)
        response = await client.complete(
            ModelRequest(messages, (), {"max_tokens": longest}),
            stream=False,
            on_delta=_ignore,
            model=model,
        )
        text = _visible(response.message.content or "", config.agent.think_tags)
        if not text.strip():
            raise ModelError("the model wrote an empty summary", code=ErrorCode.MODEL_ERROR)
        previous = text.strip()
    return previous or ""


def summary_tokens(config: Config, window: int) -> int:
    """The longest summary: ``compaction.summary_max_tokens``, but no more
    than an eighth of a small window (a 1,024-token summary would leave a
    2,048-token window no room for the conversation it stands for)."""
    return min(config.compaction.summary_max_tokens, max(64, window // 8))


def _visible(text: str, tags: Sequence[str]) -> str:
    think = ThinkFilter(tags)
    shown = think.feed(text).text + think.flush().text
    return shown


class ContextKeeper:
    """One agent's view of the model's window: its size, how the server's
    counts relate to the estimate, and the compaction of a conversation
    that would not fit."""

    def __init__(self, client: ModelClient, config: Config) -> None:
        self.client = client
        self.config = config
        self.calibration = Calibration()
        self._learned: int | None = None

    async def window(self, model: str | None = None) -> int:
        """The window in tokens: configured, learned from a refusal, asked
        of the model server, or the default (said once)."""
        if self.config.model.context_window:
            return self.config.model.context_window
        if self._learned:
            return self._learned
        # The model client says once which window it found, or that it
        # assumes the default.
        asked = await self._ask_window(model)
        return asked or self.config.compaction.default_window

    async def _knows_window(self, model: str | None) -> bool:
        """The window is configured, learned or said, not assumed."""
        if self.config.model.context_window or self._learned:
            return True
        return await self._ask_window(model) is not None

    async def _ask_window(self, model: str | None) -> int | None:
        """The window the model server says (None: it does not)."""
        try:
            answer = await self.client.context_window(model, self.config.compaction.default_window)
        except ModelError:
            # No model server configured: the request itself will say so.
            return None
        return answer.tokens if answer.source != "default" else None

    def learned(self) -> RecordedContext:
        """What this keeper learned of the window, for a recording."""
        return {"ratio": self.calibration.ratio, "window": self._learned}

    def resume(self, learned: RecordedContext) -> None:
        """Start from what a recorded turn's keeper had learned (replay)."""
        if "ratio" in learned:
            self.calibration.ratio = float(learned["ratio"])
        self._learned = learned.get("window")

    def sizes(
        self, head: Sequence[Message], messages: Sequence[Message], schemas: Sequence[ChatTool]
    ) -> _Sizes:
        ratio = self.calibration.ratio
        head_raw = sum(message_tokens(m) for m in head) + schemas_tokens(schemas)
        return _Sizes(round(head_raw * ratio), [round(message_tokens(m) * ratio) for m in messages])

    def estimate(
        self, head: Sequence[Message], messages: Sequence[Message], schemas: Sequence[ChatTool]
    ) -> int:
        return self.sizes(head, messages, schemas).total

    def measured(self, estimated: int, prompt_tokens: int) -> None:
        """The server counted ``prompt_tokens`` for a request estimated at
        ``estimated`` (with the ratio then in force)."""
        if estimated > 0 and prompt_tokens > 0:
            raw = estimated / self.calibration.ratio
            self.calibration.observe(round(raw), prompt_tokens)

    def refused(self, overflow: Overflow, estimated: int) -> None:
        """The server refused a request as too long: learn what it said."""
        if overflow.window:
            self._learned = overflow.window
        if overflow.requested:
            self.measured(estimated, overflow.requested)

    async def fit(
        self,
        messages: list[Message],
        *,
        head: Sequence[Message],
        schemas: Sequence[ChatTool],
        policy: ContextPolicy,
        model: str | None = None,
        harder: bool = False,
        force: bool = False,
    ) -> ContextCompacted | None:
        """Make ``messages`` fit before a request, in place; the event that
        says what was done, or None when it fits as it is.

        ``force`` (a person's ``/compact``): summarise everything before
        the newest exchange whatever the size, or nothing (None) when there
        is nothing before it; a summary that fails raises the
        :class:`ModelError` and leaves ``messages`` as they were."""
        window = await self.window(model)
        # A client's own system messages lead the conversation: they stay,
        # as the configured prompt does.
        lead = next((i for i, m in enumerate(messages) if m["role"] != "system"), len(messages))
        body = messages[lead:]
        sizes = self.sizes([*head, *messages[:lead]], body, schemas)
        if force:
            forced = await self._forced(body, sizes, window, model=model)
            if forced is not None:
                messages[lead:] = body
            return forced
        share = self.config.compaction.threshold * (0.7 if harder else 1.0)
        limit = int(window * share)
        if policy.compact_at is not None and policy.mode == "compact" and not harder:
            limit = min(limit, policy.compact_at)
        if sizes.total <= limit:
            return None
        if policy.mode == "refuse":
            if not await self._knows_window(model):
                # An assumed window is no ground to refuse: the model server
                # judges, and its refusal is the same error.
                return None
            raise _too_long(sizes.total, window)
        try:
            if policy.mode == "truncate":
                event = self._truncate(body, sizes, window, limit, reason="", note=False)
            else:
                event = await self._compact(body, sizes, window, limit, harder=harder, model=model)
        except ContextTooLarge:
            if await self._knows_window(model):
                raise
            # Too large only for an assumed window: the model server judges.
            return None
        messages[lead:] = body
        return event

    async def _compact(
        self,
        messages: list[Message],
        sizes: _Sizes,
        window: int,
        limit: int,
        *,
        harder: bool,
        model: str | None,
    ) -> ContextCompacted:
        cfg = self.config.compaction
        summary_room = summary_tokens(self.config, window) + 16
        room = limit - sizes.head - summary_room
        keep = min(cfg.keep_recent, window // 3) // (2 if harder else 1)
        cut = choose_cut(messages, sizes.messages, room=room, keep_recent=keep)
        if cut is None:
            raise _too_big(sizes, window, limit)
        try:
            text = await self._summary(messages[:cut], window, model)
        except ModelError as exc:
            reason = f"the summary request failed: {exc.message}"
            if exc.code == ErrorCode.TIMEOUT:
                reason = exc.message
            log.warning("compaction: %s; dropping the oldest messages instead", reason)
            return self._truncate(messages, sizes, window, limit, reason=reason, note=True)
        return self._summarised(messages, sizes, window, cut, text)

    async def _summary(self, folded: list[Message], window: int, model: str | None) -> str:
        """The summary of ``folded`` within ``compaction.summary_timeout``;
        :class:`ModelError` (code ``timeout`` past it) when there is none."""
        timeout = self.config.compaction.summary_timeout
        with trio.move_on_after(timeout):
            return await summarize(
                self.client,
                self.config,
                folded,
                window=window,
                ratio=self.calibration.ratio,
                model=model,
            )
        raise ModelError(f"the summary took longer than {timeout:g} s", code=ErrorCode.TIMEOUT)

    def _summarised(
        self, messages: list[Message], sizes: _Sizes, window: int, cut: int, text: str
    ) -> ContextCompacted:
        summary = summary_message(text)
        after = sizes.head + round(message_tokens(summary) * self.calibration.ratio)
        after += sum(sizes.messages[cut:])
        # No checkpoint from here on: the list changes whole or not at all.
        messages[:cut] = [summary]
        metrics.CONTEXT_COMPACTIONS.labels("summary").inc()
        return ContextCompacted("summary", sizes.total, after, cut, window, summary=text.strip())

    async def _forced(
        self, messages: list[Message], sizes: _Sizes, window: int, *, model: str | None
    ) -> ContextCompacted | None:
        cut = max(exchange_starts(messages), default=0)
        if cut <= 0 or (cut == 1 and is_summary(messages[0])):
            return None  # nothing before the newest exchange but a summary
        text = await self._summary(messages[:cut], window, model)
        return self._summarised(messages, sizes, window, cut, text)

    def _truncate(
        self,
        messages: list[Message],
        sizes: _Sizes,
        window: int,
        limit: int,
        *,
        reason: str,
        note: bool,
    ) -> ContextCompacted:
        marker: list[Message] = [summary_message(_TRUNCATED_NOTE)] if note else []
        marker_size = sum(round(message_tokens(m) * self.calibration.ratio) for m in marker)
        room = limit - sizes.head - marker_size
        drop = drop_oldest(messages, sizes.messages, room=room)
        if drop is None:
            raise _too_big(sizes, window, limit)
        after = sizes.head + marker_size + sum(sizes.messages[drop:])
        messages[:drop] = marker
        metrics.CONTEXT_COMPACTIONS.labels("truncation").inc()
        return ContextCompacted("truncation", sizes.total, after, drop, window, reason)


def _too_big(sizes: _Sizes, window: int, limit: int) -> ContextTooLarge:
    """Nothing can be folded to make room: say what takes it."""
    if sizes.head * 2 >= limit:
        message = (
            f"the system prompt and tool definitions alone are about {sizes.head:,} tokens "
            f"of the model's {window:,}-token context window, leaving no room for the "
            "conversation; shorten the system prompt, offer fewer tools, or use a model "
            "with a larger window"
        )
    else:
        newest = sizes.messages[-1] if sizes.messages else 0
        message = (
            f"the newest message is about {newest:,} tokens, more than the model's context "
            f"window of {window:,} tokens can hold with room for an answer; send a shorter "
            "message, or split it"
        )
    return ContextTooLarge(message, code=ErrorCode.CONTEXT_LENGTH_EXCEEDED, status=400)


def _too_long(tokens: int, window: int) -> ContextTooLarge:
    return ContextTooLarge(
        f"the conversation is about {tokens:,} tokens, more than the model's context "
        f"window of {window:,} tokens allows; truncation is disabled for this request",
        code=ErrorCode.CONTEXT_LENGTH_EXCEEDED,
        status=400,
    )
