"""The gateway's chat sessions: one turn at a time per chat.

A session is one conversation on one platform: a chat, or one thread of it
(a Telegram forum topic, a Slack thread) — ``(platform, chat_id,
thread_id)`` — kept in memory: the conversation history and a
``ToolContext``. Answers go to the thread the question came from. Turns of a session
run one at a time in the session's worker task, each in its own cancel scope
with the agent and the editor as sibling tasks. A new message either cancels
the running turn (``gateway.on_new_message: interrupt``, the default) or
waits behind it (``queue``). ``/stop`` cancels the turn and drops what
waits; ``/new`` also starts a new conversation. ``/verbose`` turns tool
progress on or off for the chat (kept across restarts; the running turn
follows at once). ``/compact`` summarises the conversation now (all but its
newest exchange) and ``/context`` says how full the model's window is; both
wait for a running turn to end. Command replies are queued with the turns,
so a chat sees them in the order it asked.

Besides the turn's own events, a chat is told (``GatewayNotice``, shown by
the message editor like the rest of the turn) when its message waited
``gateway.late_notice_after`` seconds or more before reaching us (we were
offline), when a turn runs longer than ``gateway.long_turn_notice``, and,
instead of "interrupted", when the gateway stops while answering. A user
whose chat hides tool progress is told once, the first time a tool runs
long, that ``/verbose`` shows it (``LONG_TOOL_HINT``; remembered in the
store, so a restart does not repeat it).

Dangerous-command approval: each turn asks the user who sent the message
(and the platform's approvers; ``approval_answers``). The question is shown
in the chat by ``consumers/approval_prompts`` in front of the editor, with
buttons where the platform has them; a typed "yes" or "no" answers it
where it has none (and is not taken as a new message).
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

import trio

from ..agent import Agent
from ..config import Config
from ..consumers.approval_prompts import (
    ApprovalPrompts,
    parse_typed_answer,
    with_approval_prompts,
)
from ..consumers.context_lines import compact_reply, context_line
from ..consumers.editor import EditorControl, run_editor
from ..consumers.editor_plan import EditorReport, EditorSettings
from ..consumers.messenger import Messenger, PlatformError
from ..consumers.rate_limits import waiting_out_rate_limits
from ..events import GatewayNotice, StreamEvent
from ..llm import ModelError
from ..platforms.base import ButtonPress, InboundMessage
from ..platforms.registry import edit_interval_for
from ..tools import ToolContext
from ..turn import INTERNAL_ERROR, Turn, TurnResult, run_turn
from ..wire.messages import Message
from .approval_answers import UserNames, acknowledge_press, answer, approval_channel
from .chat_settings import ChatSettings, hint_key, verbose_key
from .history import ChatHistory, MemoryHistory, chat_key
from .user_content import user_content

__all__ = [
    "HELP_TEXT",
    "LONG_TOOL_HINT",
    "REPLY_TIMEOUT",
    "RESTART_NOTICE",
    "ChatSessions",
    "Session",
    "SessionKey",
    "duration_words",
]

# The gateway's modules share one logger, so operators tune it by one name.
log = logging.getLogger("hermes_trio.gateway")

# A command reply or refusal is small; if the platform can't take it in this
# long, give up rather than hold the session's next turn.
REPLY_TIMEOUT = 10.0
REPLY_ATTEMPTS = 10

HELP_TEXT = (
    "Send me a message and I'll answer.\n"
    "/stop: stop the answer in progress\n"
    "/new: start a new conversation\n"
    "/compact: summarise the conversation so far to free the model's context\n"
    "/context: how much of the model's context the conversation uses\n"
    "/verbose: show or hide what the tools are doing"
)

LONG_TOOL_HINT = (
    "⏳ This is taking a while ({tool} is still running). /verbose shows tool progress."
)


RESTART_NOTICE = GatewayNotice(
    "restart",
    "⟳ The gateway is stopping (a restart or shutdown), so this answer ends here. "
    "Send your message again in a minute.",
)

SessionKey = tuple[str, str, str | None]
"""``(platform, chat_id, thread_id)``."""


def duration_words(seconds: float) -> str:
    """ "45 s", "3 min", "2 h 5 min": how long, for a person."""
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    minutes = round(seconds / 60)
    if minutes < 60:
        return f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min" if minutes else f"{hours} h"


class _Reply:
    """A short text a session owes its chat, sent in order with its turns."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


class _Forget:
    """``/new`` in the queue: the stored conversation goes once the turn
    before it has ended (and written its history back)."""


_FORGET = _Forget()


class _Verbose:
    """``/verbose`` in the queue: ``on`` True/False sets tool progress,
    None turns it the other way (decided once the setting is read)."""

    __slots__ = ("on",)

    def __init__(self, on: bool | None) -> None:
        self.on = on


class _Context:
    """``/compact`` (``compact`` True) or ``/context`` in the queue: done on
    the conversation as the turn before it left it."""

    __slots__ = ("compact",)

    def __init__(self, compact: bool) -> None:
        self.compact = compact


def _key_of(session: Session) -> str:
    return chat_key(session.platform, session.chat_id, session.thread_id)


@dataclass(eq=False)
class Session:
    """One conversation: a chat on one platform, or one thread of it."""

    platform: str
    chat_id: str
    messages: list[Message]
    tool_context: ToolContext
    thread_id: str | None = None
    pending: deque[InboundMessage | _Reply | _Forget | _Verbose | _Context] = field(
        default_factory=deque
    )
    turn: Turn | None = None
    """The running turn; cancelling it interrupts the turn."""
    show_tools: bool | None = None
    """Tool progress in this chat (``/verbose``); None until read."""
    control: EditorControl | None = None
    """Reaches the running turn's editor."""
    working: bool = False
    turns_done: int = 0
    last_report: EditorReport | None = None
    typed_approval: str | None = None
    """The approval the running turn waits on that a typed "yes"/"no"
    answers (its prompt has no buttons)."""


class ChatSessions:
    """Every chat's session, and the worker tasks that run their turns.

    Workers run in ``nursery``; ``messenger(platform, chat_id, thread_id)``
    reaches a chat (or a thread of it), and ``notify()`` is called whenever a
    turn ends or a reply went out (or could not). ``wall_clock`` is the Unix
    time, compared with when a platform says a message was sent.
    """

    def __init__(
        self,
        config: Config,
        agent: Agent,
        nursery: trio.Nursery,
        messenger: Callable[[str, str, str | None], Messenger],
        notify: Callable[[], None],
        *,
        wall_clock: Callable[[], float] = time.time,
        history: ChatHistory | None = None,
        settings: ChatSettings | None = None,
    ) -> None:
        self.config = config
        self._history: ChatHistory = history or MemoryHistory()
        self._settings = settings or ChatSettings()
        self.agent = agent
        self.sessions: dict[SessionKey, Session] = {}
        self._nursery = nursery
        self._messenger = messenger
        self._notify = notify
        self._wall_clock = wall_clock
        self.names = UserNames()

    def get(
        self, platform: str, chat_id: str | int, thread_id: str | int | None = None
    ) -> Session | None:
        thread = None if thread_id is None else str(thread_id)
        return self.sessions.get((platform, str(chat_id), thread))

    def idle(self) -> bool:
        """No session has a turn running or work waiting."""
        return not any(s.working for s in self.sessions.values())

    def handle(self, platform: str, message: InboundMessage) -> None:
        """Queue an allowed message (or run its command) in its chat's
        session. Never waits: platform calls and turns happen in the worker."""
        self.names.remember(platform, message.user_id, message.user_name)
        if message.press is not None:
            self._nursery.start_soon(self._press, platform, message.user_id, message.press)
            return
        session = self._session(platform, message.chat_id, message.thread_id)
        typed = parse_typed_answer(message.text) if session.typed_approval else None
        if typed is not None and session.typed_approval is not None:
            notice = answer(session.typed_approval, typed, message.user_id)
            if notice is not None:
                self._nursery.start_soon(
                    self.say, platform, message.chat_id, notice, message.thread_id
                )
            return
        command = _command(message.text)
        if command == "/stop":
            had_work = self._cancel(session)
            session.pending.append(_Reply("stopped" if had_work else "nothing to stop"))
        elif command in ("/new", "/reset"):
            self._cancel(session)
            # A new list, not .clear(): the cancelled turn still appends its
            # interrupt record to the list it was given.
            session.messages = []
            session.tool_context = self.agent.new_tool_context()
            session.pending.append(_FORGET)
            session.pending.append(_Reply("new conversation"))
        elif command in ("/start", "/help"):
            session.pending.append(_Reply(HELP_TEXT))
        elif command == "/verbose":
            self._verbose(session, message.text)
        elif command in ("/compact", "/context"):
            session.pending.append(_Context(command == "/compact"))
        elif not message.text.strip() and not message.attachments:
            return
        else:
            if self.config.gateway.on_new_message == "interrupt" and session.turn is not None:
                log.info(
                    "%s chat %s: new message interrupts the running turn", platform, message.chat_id
                )
                session.turn.cancel("interrupted by a new message")
            session.pending.append(message)
        self._wake(session)

    async def _press(self, platform: str, user_id: str, press: ButtonPress) -> None:
        try:
            await acknowledge_press(platform, user_id, press)
        finally:
            self._notify()

    def _session(self, platform: str, chat_id: str, thread_id: str | None) -> Session:
        key = (platform, chat_id, thread_id)
        session = self.sessions.get(key)
        if session is None:
            session = Session(
                platform, chat_id, [], self.agent.new_tool_context(), thread_id=thread_id
            )
            self.sessions[key] = session
        return session

    def _cancel(self, session: Session) -> bool:
        """Cancel the running turn and drop waiting messages; True if there was any."""
        waiting = [item for item in session.pending if isinstance(item, InboundMessage)]
        session.pending = deque(
            item for item in session.pending if not isinstance(item, InboundMessage)
        )
        running = session.turn is not None and not session.turn.cancel_called
        if session.turn is not None:
            session.turn.cancel("stopped")
        return running or bool(waiting)

    def _verbose(self, session: Session, text: str) -> None:
        words = text.split()
        wanted = words[1].lower() if len(words) > 1 else None
        if wanted not in (None, "on", "off"):
            session.pending.append(
                _Reply(
                    "/verbose turns tool progress on or off: /verbose on, /verbose off, "
                    "or /verbose alone to switch."
                )
            )
            return
        on = None if wanted is None else wanted == "on"
        if on is None and session.show_tools is not None:
            on = not session.show_tools
        if on is not None:
            # Known now: the running turn follows at once, not after it ends.
            session.show_tools = on
            if session.control is not None:
                session.control.show_tools(on)
        session.pending.append(_Verbose(on))

    async def _set_verbose(self, session: Session, on: bool | None) -> None:
        if on is None:
            on = not await self._shows_tools(session)
        session.show_tools = on
        key = verbose_key(session.platform, session.chat_id, session.thread_id)
        await self._settings.put(key, "on" if on else "off")
        messenger = self._messenger(session.platform, session.chat_id, session.thread_id)
        if not on:
            text = "Tool progress is off. /verbose turns it on."
        elif messenger.capabilities.can_edit:
            text = "Tool progress is on: each tool is shown while it runs. /verbose turns it off."
        else:
            text = "Tool progress is on: answers list the tools that ran. /verbose turns it off."
        await self.say(session.platform, session.chat_id, text, session.thread_id)

    async def _shows_tools(self, session: Session) -> bool:
        """Tool progress in this chat: its ``/verbose``, else ``display.show_tools``."""
        if session.show_tools is None:
            key = verbose_key(session.platform, session.chat_id, session.thread_id)
            stored = await self._settings.get(key)
            if session.show_tools is None:  # a /verbose may have come meanwhile
                default = self.config.display.show_tools
                session.show_tools = default if stored is None else stored == "on"
        return session.show_tools

    def _wake(self, session: Session) -> None:
        if not session.working:
            session.working = True
            self._nursery.start_soon(self._work, session)

    async def _work(self, session: Session) -> None:
        try:
            while session.pending:
                item = session.pending.popleft()
                if isinstance(item, _Forget):
                    await self._history.forget(_key_of(session))
                    continue
                if isinstance(item, _Reply):
                    await self.say(session.platform, session.chat_id, item.text, session.thread_id)
                    continue
                if isinstance(item, _Verbose):
                    await self._set_verbose(session, item.on)
                    continue
                if isinstance(item, _Context):
                    await self._context(session, compact=item.compact)
                    continue
                batch = [item]
                if self.config.gateway.on_new_message == "interrupt":
                    # Messages that piled up while a cancelled turn cleaned up
                    # are answered together, not one interrupted turn each.
                    while session.pending and isinstance(
                        head := session.pending[0], InboundMessage
                    ):
                        session.pending.popleft()
                        batch.append(head)
                await self._turn(session, batch)
        finally:
            session.working = False
            self._notify()

    async def _context(self, session: Session, *, compact: bool) -> None:
        """``/compact`` or ``/context`` on the chat's stored conversation;
        a compacted one is stored as the new start."""
        key = _key_of(session)
        token, stored = await self._history.begin(key)
        if stored is not None:
            session.messages = stored
        messages = session.messages
        compacted = False
        try:
            if compact:
                before = len(messages)
                event = await self.agent.compact(messages)
                compacted = event is not None
                log.info(
                    "%s chat %s: /compact folded %d of %d messages",
                    session.platform,
                    session.chat_id,
                    event.folded if event else 0,
                    before,
                )
                text = compact_reply(event)
            else:
                tokens, window = await self.agent.context_size(messages)
                text = context_line(tokens, window, len(messages))
        except ModelError as exc:
            text = f"⚠️ Could not summarise the conversation: {exc.message}"
        finally:
            await self._history.end(key, token, messages, compacted=compacted)
        await self.say(session.platform, session.chat_id, text, session.thread_id)

    def editor_settings(
        self,
        platform: str,
        *,
        stream: bool,
        show_tools: bool | None = None,
        long_tool_hint: str | None = None,
    ) -> EditorSettings:
        """``stream`` is the turn's own choice, so the agent and the editor
        agree on it; ``EditorPlan`` falls back to whole messages by itself
        when the messenger cannot edit. ``show_tools`` is the chat's own
        (None: ``display.show_tools``)."""
        streaming = self.config.streaming
        return EditorSettings(
            edit_interval=edit_interval_for(self.config, platform),
            min_tokens=streaming.min_tokens,
            cursor=streaming.cursor,
            streaming=stream,
            show_tool_progress=self.config.display.show_tools if show_tools is None else show_tools,
            show_compaction=self.config.display.show_compaction,
            long_tool_hint=long_tool_hint,
        )

    def _notices(self, batch: list[InboundMessage]) -> list[tuple[float, GatewayNotice]]:
        """The gateway's notices for a turn answering ``batch``: when to show each."""
        notices: list[tuple[float, GatewayNotice]] = []
        late_after = self.config.gateway.late_notice_after
        sent = [m.sent_at for m in batch if m.sent_at is not None]
        if late_after > 0 and sent:
            waited = self._wall_clock() - min(sent)
            if waited >= late_after:
                text = (
                    f"⏳ Back online. Your message waited {duration_words(waited)} "
                    "while I was away; answering now."
                )
                notices.append((0.0, GatewayNotice("online", text, {"waited": waited})))
        long_after = self.config.gateway.long_turn_notice
        if long_after > 0:
            text = f"⏳ Still working on it ({duration_words(long_after)} so far)…"
            notices.append((long_after, GatewayNotice("long_turn", text, {"after": long_after})))
        return notices

    async def _user_messages(self, batch: list[InboundMessage]) -> tuple[list[Message], list[str]]:
        """The user messages for ``batch`` (text and images), and what the
        chat must be told first (files the model cannot use)."""
        messages: list[Message] = []
        replies: list[str] = []
        for message in batch:
            prepared = await user_content(message, vision=self.config.model.vision)
            replies.extend(prepared.replies)
            if prepared.content is not None:
                messages.append({"role": "user", "content": prepared.content})
        return messages, replies

    async def _turn(self, session: Session, batch: list[InboundMessage]) -> None:
        platform, chat_id, thread_id = session.platform, session.chat_id, session.thread_id
        asked, replies = await self._user_messages(batch)
        for reply in replies:
            await self.say(platform, chat_id, reply, thread_id)
        if not asked:
            return  # nothing in it the model can use; the replies said why
        messenger = self._messenger(platform, chat_id, thread_id)
        stream = self.agent.streams(platform)
        # Asked of the user this turn answers (the last message's sender).
        hinted = hint_key(platform, batch[-1].user_id)
        settings, show_tools = await self._turn_settings(session, messenger, stream, hinted)
        key = _key_of(session)
        token, stored = await self._history.begin(key)
        if stored is not None:
            session.messages = stored
        messages = session.messages
        messages.extend(asked)
        notices = self._notices(batch)
        reports: list[EditorReport] = []
        turn = Turn()
        control = EditorControl()

        def cut_off() -> GatewayNotice | None:
            # Cancelled without its own handle being used: only the gateway
            # stopping cancels a turn from outside.
            return RESTART_NOTICE if turn.interrupted is None else None

        def why_cancelled() -> str:
            if turn.interrupted is None:
                return "the gateway is stopping"
            return turn.interrupted

        def typed(approval_id: str | None) -> None:
            session.typed_approval = approval_id

        prompts = ApprovalPrompts(
            messenger,
            who=lambda user_id: self.names.name(platform, user_id),
            why_cancelled=why_cancelled,
            typed=typed,
        )

        async def edit(receive: trio.MemoryReceiveChannel[StreamEvent]) -> EditorReport:
            return await run_editor(
                receive,
                messenger,
                settings,
                notices=notices,
                interrupt_notice=cut_off,
                control=control,
            )

        async def show(receive: trio.MemoryReceiveChannel[StreamEvent]) -> None:
            reports.append(await with_approval_prompts(receive, edit, prompts))

        log.info("%s chat %s: turn started", platform, chat_id)
        began = trio.current_time()
        session.turn = turn
        session.control = control
        if session.show_tools is not None and session.show_tools != show_tools:
            control.show_tools(session.show_tools)  # a /verbose came meanwhile
        try:
            # A bug in a tool, the agent or the editor ends this turn (the
            # turn's crash policy), not the gateway.
            result = await run_turn(
                self.agent,
                messages,
                show,
                turn=turn,
                stream=stream,
                tool_context=session.tool_context,
                approvals=approval_channel(self.agent, platform, batch[-1].user_id),
            )
        finally:
            session.typed_approval = None
            session.turn = None
            session.control = None
            session.turns_done += 1
            session.last_report = reports[0] if reports else None
            compacted = turn.result is not None and turn.result.compacted
            await self._history.end(key, token, messages, compacted=compacted)
            # From the control, not the report: a turn cut off right after
            # the hint still counts it as seen.
            if control.hinted:
                await self._settings.put(hinted, "1")
        await self._turn_over(session, turn, result, began, shown=bool(reports), settings=settings)

    async def _turn_settings(
        self, session: Session, messenger: Messenger, stream: bool, hinted: str
    ) -> tuple[EditorSettings, bool]:
        """The editor's settings for a turn of ``session``, and whether it
        shows tool calls; ``hinted`` keys whether its user saw the hint."""
        show_tools = await self._shows_tools(session)
        hint = None
        if not show_tools and messenger.capabilities.can_edit:
            hint = None if await self._settings.get(hinted) else LONG_TOOL_HINT
        settings = self.editor_settings(
            session.platform, stream=stream, show_tools=show_tools, long_tool_hint=hint
        )
        return settings, show_tools

    async def _turn_over(
        self,
        session: Session,
        turn: Turn,
        result: TurnResult,
        began: float,
        *,
        shown: bool,
        settings: EditorSettings,
    ) -> None:
        """The turn's log line; a failure the editor never showed, said."""
        platform, chat_id = session.platform, session.chat_id
        failed = result.error_code == INTERNAL_ERROR
        outcome = "interrupted" if turn.scope.cancelled_caught else "failed" if failed else "done"
        log.info(
            "%s chat %s: turn %s after %.1f s",
            platform,
            chat_id,
            outcome,
            trio.current_time() - began,
        )
        if failed and not shown:
            # The editor crashed, so the chat has not seen the ending yet.
            await self.say(
                platform,
                chat_id,
                settings.error_note.format(error=result.error),
                session.thread_id,
            )

    async def say(
        self, platform: str, chat_id: str, text: str, thread_id: str | None = None
    ) -> bool:
        """Send one short message; logs and gives up on failure."""
        messenger = self._messenger(platform, chat_id, thread_id)
        try:
            with trio.move_on_after(REPLY_TIMEOUT):
                try:
                    await waiting_out_rate_limits(
                        lambda: messenger.send(text), within=REPLY_TIMEOUT, attempts=REPLY_ATTEMPTS
                    )
                    return True
                except PlatformError as exc:
                    log.warning("%s chat %s: could not send a reply: %s", platform, chat_id, exc)
                    return False
            log.warning("%s chat %s: could not send a reply in time", platform, chat_id)
            return False
        finally:
            self._notify()


def _command(text: str) -> str | None:
    """``/stop`` for "/stop", "/STOP" or "/stop@my_bot" (Telegram groups)."""
    words = text.strip().split(maxsplit=1)
    if not words or not words[0].startswith("/"):
        return None
    return words[0].split("@", 1)[0].lower()
