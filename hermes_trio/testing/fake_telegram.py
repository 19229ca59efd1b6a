"""A fake Telegram Bot API on a loopback port, enforcing the parts of the
real contract an adapter relies on.

    async with open_fake_telegram(token="123:ABC") as fake:
        config = TelegramConfig(token="123:ABC", api_base_url=fake.base_url)
        fake.push_message(chat_id=42, user_id=7, text="hi")
        ...
        assert fake.texts(42) == ["Hello!"]

What it enforces, with Telegram's own error texts:

- ``/bot<token>/<method>``; a wrong token is 401 Unauthorized.
- 4096 UTF-16 code units per message, counted after MarkdownV2 parsing;
  ``parse_mode=MarkdownV2`` is parsed with Telegram's algorithm
  (``parse_markdown_v2``), so bad markup is "can't parse entities".
- Editing to identical text (and entities) is "message is not modified".
- ``edit_limit`` edits per chat within ``edit_window`` seconds, then 429
  with ``parameters.retry_after``; ``fail_next`` injects any other error.
- ``getUpdates`` long-polls up to ``timeout`` seconds; an ``offset`` confirms
  every update below it, as on the real server; a second concurrent poll
  ends the first with 409 Conflict.
- Forum topics: a message pushed with ``topic=`` is a topic message
  (``message_thread_id``, ``is_topic_message``); ``sendMessage`` with a
  ``message_thread_id`` in a chat without that topic is "message thread not
  found".
- Files: a pushed photo or document is kept; ``getFile`` gives its
  ``file_path`` and ``GET /file/bot<token>/<file_path>`` its bytes.
- ``sendMessageDraft`` as Bot API 9.x documents it: the ``chat_id`` of a
  *private* chat (any other chat is 400 ``TEXTDRAFT_PEER_INVALID``, as the
  real server answers), a non-zero integer ``draft_id``, ``text`` of
  0–4096 characters after entities parsing (empty: the "Thinking…"
  placeholder), optional ``message_thread_id``/``parse_mode``; returns
  ``True``. A chat's type is the ``chat_type`` it was pushed with (else a
  positive id is private, as on Telegram). ``drafts_supported=False``
  answers it 404 Not Found, as a Bot API server older than the method does.

- Inline keyboards: ``reply_markup`` on ``sendMessage``/``editMessageText``
  must be an ``InlineKeyboardMarkup`` (``inline_keyboard``: rows of buttons,
  each with a non-empty ``text`` and exactly one action; ``callback_data``
  of 1–64 bytes, else 400 ``BUTTON_DATA_INVALID``); an ``editMessageText``
  without ``reply_markup`` takes the keyboard away, as Telegram does.
  ``press_button`` queues the ``callback_query`` update a user's press
  makes; ``answerCallbackQuery`` must answer it once (``text`` at most 200
  characters), an unknown or already answered query is 400 ``query is too
  old and response timeout expired or query ID is invalid``.
- ``getUpdates`` delivers only the update types in the last
  ``allowed_updates`` it was given (default: all but a few, as on Telegram).

State for assertions: ``messages[chat_id]`` (bot messages with their full
edit history), ``drafts[chat_id]`` (every draft shown), ``calls`` (every
call with ``trio.current_time()``), ``chat_actions``. Chat ids are keys as
strings.
"""

from __future__ import annotations

import json
import math
import time
from collections import defaultdict, deque
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, TypedDict, cast, get_args

import trio

from ..consumers.messenger import measure
from ..platforms.telegram.api_types import (
    AnswerCallbackQueryParams,
    ApiError,
    ApiOk,
    CallbackQuery,
    Chat,
    ChatAction,
    ChatType,
    File,
    InlineKeyboardButton,
    Message,
    MessageEntity,
    PhotoSize,
    ResponseParameters,
    Update,
    UpdateContent,
    User,
)
from .fake_http import FakeRequest, FakeResponse, serve_http
from .telegram_markdown import MarkdownV2Error, parse_markdown_v2

__all__ = [
    "FakeDraft",
    "FakeMessage",
    "FakeTelegram",
    "TelegramCall",
    "open_fake_telegram",
]

MAX_LENGTH = 4096
NOT_MODIFIED = (
    "Bad Request: message is not modified: specified new message content and reply markup "
    "are exactly the same as a current message content and reply markup of the message"
)
CONFLICT = (
    "Conflict: terminated by other getUpdates request; "
    "make sure that only one bot instance is running"
)
CHAT_ACTIONS = frozenset(get_args(ChatAction))


#: What a method of the fake answers with.
Result = User | File | list[Update] | Message | bool
#: A call's answer.
Answer = ApiOk[Result] | ApiError


class NoAnswer(TypedDict):
    """The ``response`` of a call still being answered: ``{}``."""


@dataclass
class TelegramCall:
    method: str
    #: The parameters as sent (query and body, not checked).
    params: dict[str, Any]
    time: float
    status: int = 0
    response: Answer | NoAnswer = field(default_factory=NoAnswer)


@dataclass
class FakeMessage:
    """A message the bot sent, as the chat shows it now."""

    message_id: int
    chat_id: str
    #: Visible text (after MarkdownV2 parsing) and its entities.
    text: str
    entities: tuple[MessageEntity, ...]
    #: Text exactly as sent in the last successful call, and its parse_mode.
    raw: str
    parse_mode: str | None
    sent_at: float
    #: The forum topic it was sent to (``message_thread_id``), if any.
    thread_id: int | None = None
    #: Every visible text the message has had, the sent one first.
    history: list[str] = field(default_factory=list)
    edited_at: list[float] = field(default_factory=list)
    deleted: bool = False
    #: The inline keyboard shown under it now: rows of buttons, as sent.
    keyboard: list[list[InlineKeyboardButton]] = field(default_factory=list)

    def buttons(self) -> list[str]:
        """The labels of the buttons under it, row by row."""
        return [button["text"] for row in self.keyboard for button in row]

    @property
    def edits(self) -> int:
        return len(self.edited_at)


@dataclass
class FakeDraft:
    """One ``sendMessageDraft`` the fake accepted."""

    draft_id: int
    chat_id: str
    #: Visible text (after MarkdownV2 parsing); empty: the "Thinking…" placeholder.
    text: str
    raw: str
    parse_mode: str | None
    time: float
    thread_id: int | None = None


@dataclass
class _Failure:
    error_code: int
    description: str
    parameters: ResponseParameters | None
    times: int


class _ApiError(Exception):
    def __init__(
        self, code: int, description: str, parameters: ResponseParameters | None = None
    ) -> None:
        super().__init__(description)
        self.code = code
        self.description = description
        self.parameters = parameters


def _bad(description: str) -> _ApiError:
    return _ApiError(400, f"Bad Request: {description}")


class FakeTelegram:
    def __init__(
        self,
        token: str,
        *,
        edit_limit: int | None = None,
        edit_window: float = 60.0,
        bot_username: str = "hermes_test_bot",
        drafts_supported: bool = True,
    ) -> None:
        self.token = token
        self.drafts_supported = drafts_supported
        self.edit_limit = edit_limit
        self.edit_window = edit_window
        self.base_url = ""
        self.bot_user: User = {
            "id": 1000,
            "is_bot": True,
            "first_name": "Hermes",
            "username": bot_username,
        }
        self.messages: dict[str, list[FakeMessage]] = defaultdict(list)
        self.drafts: dict[str, list[FakeDraft]] = defaultdict(list)
        self._chat_types: dict[str, ChatType] = {}
        self.calls: list[TelegramCall] = []
        self.chat_actions: list[tuple[str, str, float]] = []
        self.updates: list[Update] = []  # pushed, not yet confirmed
        self.confirmed_offset = 0
        self._next_update_id = 1
        self._next_message_id: dict[str, int] = defaultdict(lambda: 1)
        self._edit_times: dict[str, deque[float]] = defaultdict(deque)
        self._failures: dict[str, list[_Failure]] = defaultdict(list)
        self._changed = trio.Event()
        self._poll_generation = 0
        self.files: dict[str, tuple[str, bytes]] = {}
        """``file_id`` → ``(file_path, bytes)`` of every pushed file."""
        self.downloads: list[str] = []
        """The ``file_path`` of every file downloaded, in order."""
        self._topics: set[tuple[str, int]] = set()
        self.allowed_updates: list[str] | None = None
        """The last ``allowed_updates`` given to ``getUpdates`` (None: never)."""
        self.callback_answers: dict[str, AnswerCallbackQueryParams] = {}
        """``callback_query_id`` → the ``answerCallbackQuery`` parameters."""
        self._open_queries: set[str] = set()
        self._next_query = 1

    # -- test helpers ------------------------------------------------------

    def push_message(
        self,
        chat_id: int | str,
        user_id: int | str,
        text: str,
        *,
        user_name: str | None = "tester",
        first_name: str = "Test",
        chat_type: ChatType = "private",
        topic: int | None = None,
        photo: bytes | None = None,
        document: tuple[str, str, bytes] | None = None,
        sent_at: float | None = None,
    ) -> Update:
        """Queue an incoming user message for ``getUpdates``; returns the update.

        ``topic``: sent in that forum topic (the chat becomes a forum
        supergroup). ``photo`` (JPEG bytes) or ``document`` (``(file name,
        MIME type, bytes)``) come with ``text`` as their caption.
        ``sent_at``: its ``date`` (Unix seconds; default now)."""
        key = str(chat_id)
        self._chat_types[key] = "supergroup" if topic is not None else chat_type
        message_id = self._next_message_id[key]
        self._next_message_id[key] += 1
        sender = _user(user_id, first_name, user_name)
        chat = _chat(chat_id, chat_type)
        message: Message = {
            "message_id": message_id,
            "from": sender,
            "chat": chat,
            # Unix time, like Telegram's: the gateway compares it with its wall clock.
            "date": int(time.time() if sent_at is None else sent_at),
        }
        if topic is not None:
            chat["type"], chat["is_forum"] = "supergroup", True
            message["message_thread_id"], message["is_topic_message"] = topic, True
            self._topics.add((key, topic))
        if photo is not None:
            # Telegram offers a photo in several sizes, the largest last.
            message["photo"] = [
                self._keep_photo("photos/thumb.jpg", photo[:64], 90, 90),
                self._keep_photo("photos/full.jpg", photo, 1280, 960),
            ]
        if document is not None:
            name, mime_type, data = document
            kept = self._keep_file(f"documents/{name}", data)
            message["document"] = {
                "file_id": kept["file_id"],
                "file_unique_id": kept["file_unique_id"],
                "file_size": len(data),
                "file_name": name,
                "mime_type": mime_type,
            }
        if photo is not None or document is not None:
            if text:
                message["caption"] = text
        else:
            message["text"] = text
        return self.push_update({"message": message})

    def press_button(
        self,
        chat_id: int | str,
        message_id: int,
        user_id: int | str,
        label: str,
        *,
        user_name: str | None = "tester",
        first_name: str = "Test",
    ) -> Update:
        """Queue the ``callback_query`` a user's press on the button
        labelled ``label`` under the bot's message makes; returns the
        update. The button must be shown now (AssertionError otherwise)."""
        message = next(
            (m for m in self.messages.get(str(chat_id), []) if m.message_id == message_id),
            None,
        )
        assert message is not None and not message.deleted, f"no message {message_id}"
        button = next((b for row in message.keyboard for b in row if b["text"] == label), None)
        assert button is not None, f"no button {label!r} under message {message_id}"
        sender = _user(user_id, first_name, user_name)
        query_id = f"{self._next_query}{int(user_id):012d}"
        self._next_query += 1
        self._open_queries.add(query_id)
        query: CallbackQuery = {
            "id": query_id,
            "from": sender,
            "message": self._message_object(message),
            "chat_instance": f"ci{chat_id}",
            "data": button["callback_data"],
        }
        return self.push_update({"callback_query": query})

    def _keep_file(self, path: str, data: bytes) -> File:
        """Keep a pushed file for ``getFile``; its ``File`` without the path."""
        file_id = f"file-{len(self.files) + 1}"
        self.files[file_id] = (f"{len(self.files) + 1}-{path}", data)
        return {"file_id": file_id, "file_unique_id": f"u{file_id}", "file_size": len(data)}

    def _keep_photo(self, path: str, data: bytes, width: int, height: int) -> PhotoSize:
        kept = self._keep_file(path, data)
        return {
            "file_id": kept["file_id"],
            "file_unique_id": kept["file_unique_id"],
            "file_size": len(data),
            "width": width,
            "height": height,
        }

    def push_update(self, payload: UpdateContent) -> Update:
        """Queue any update (``payload`` without ``update_id``). It is sent as
        given, so a test may push one Telegram would never send."""
        update: Update = {"update_id": self._next_update_id, **payload}
        self._next_update_id += 1
        self.updates.append(update)
        self._notify()
        return update

    def fail_next(
        self,
        method: str,
        error_code: int,
        description: str,
        *,
        parameters: ResponseParameters | None = None,
        times: int = 1,
    ) -> None:
        """Answer the next ``times`` calls of ``method`` with this error."""
        self._failures[method.lower()].append(_Failure(error_code, description, parameters, times))

    def calls_to(self, method: str) -> list[TelegramCall]:
        return [c for c in self.calls if c.method.lower() == method.lower()]

    def visible(self, chat_id: int | str) -> list[FakeMessage]:
        """The bot's messages in the chat that were not deleted."""
        return [m for m in self.messages.get(str(chat_id), []) if not m.deleted]

    def texts(self, chat_id: int | str, *, topic: int | None = None) -> list[str]:
        """Visible texts in the chat; with ``topic``, in that forum topic only."""
        return [m.text for m in self.visible(chat_id) if topic is None or m.thread_id == topic]

    async def wait_until(self, predicate: Callable[[], bool]) -> None:
        """Return once ``predicate()`` holds; re-checked after every call
        and push. Put a ``trio.fail_after`` around it."""
        while not predicate():
            await self._changed.wait()

    def _notify(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    # -- HTTP --------------------------------------------------------------

    async def handle(self, request: FakeRequest) -> FakeResponse:
        parts = request.path.strip("/").split("/")
        if parts[0] == "file" and len(parts) >= 3 and parts[1].startswith("bot"):
            return self._download(parts[1][3:], "/".join(parts[2:]))
        if len(parts) != 2 or not parts[0].startswith("bot"):
            return _error_response(404, "Not Found")
        if parts[0][3:] != self.token:
            return _error_response(401, "Unauthorized")
        method = parts[1]
        try:
            params = request.params()
        except ValueError:
            return _error_response(400, "Bad Request: can't parse JSON body")
        call = TelegramCall(method, params, trio.current_time())
        self.calls.append(call)
        try:
            failure = self._take_failure(method)
            if failure is not None:
                raise _ApiError(failure.error_code, failure.description, failure.parameters)
            handler = _METHODS.get(method.lower())
            if method.lower() == "sendmessagedraft" and not self.drafts_supported:
                handler = None
            if handler is None:
                raise _ApiError(404, "Not Found")
            result = await handler(self, params)
            body: Answer = {"ok": True, "result": result}
            status = 200
        except _ApiError as exc:
            status = exc.code
            error: ApiError = {"ok": False, "error_code": exc.code, "description": exc.description}
            if exc.parameters:
                error["parameters"] = exc.parameters
            body = error
        call.status, call.response = status, body
        self._notify()
        return FakeResponse.json(body, status)

    def _download(self, token: str, file_path: str) -> FakeResponse:
        if token != self.token:
            return _error_response(401, "Unauthorized")
        for path, data in self.files.values():
            if path == file_path:
                self.downloads.append(file_path)
                self._notify()
                return FakeResponse(200, data, [("content-type", "application/octet-stream")])
        return _error_response(404, "Not Found")

    def _take_failure(self, method: str) -> _Failure | None:
        queue = self._failures.get(method.lower())
        if not queue:
            return None
        failure = queue[0]
        failure.times -= 1
        if failure.times <= 0:
            queue.pop(0)
        return failure

    # -- methods -----------------------------------------------------------

    async def _get_me(self, params: dict[str, Any]) -> User:
        return self.bot_user

    async def _get_file(self, params: dict[str, Any]) -> File:
        file_id = str(params.get("file_id"))
        if file_id not in self.files:
            raise _bad("invalid file_id")
        path, data = self.files[file_id]
        return {
            "file_id": file_id,
            "file_unique_id": f"u{file_id}",
            "file_size": len(data),
            "file_path": path,
        }

    async def _get_updates(self, params: dict[str, Any]) -> list[Update]:
        offset = _int_param(params, "offset", 0)
        limit = max(1, min(_int_param(params, "limit", 100), 100))
        timeout = max(0, _int_param(params, "timeout", 0))
        if offset > 0:
            # Asking from `offset` on confirms everything before it, for good.
            self.confirmed_offset = max(self.confirmed_offset, offset)
            self.updates = [u for u in self.updates if u["update_id"] >= offset]
        elif offset < 0:
            return self.updates[offset:][:limit]
        if "allowed_updates" in params:
            allowed = params["allowed_updates"]
            if isinstance(allowed, str):
                allowed = json.loads(allowed)
            # An empty list means "all but the opt-in types", as before.
            self.allowed_updates = list(allowed) or None
            # Telegram drops updates of types not asked for.
            self.updates = [u for u in self.updates if self._wanted(u)]
        self._poll_generation += 1
        generation = self._poll_generation
        self._notify()  # wakes an older poll so it can see it was superseded
        with trio.move_on_after(timeout):
            while not self.updates:
                await self._changed.wait()
                if generation != self._poll_generation:
                    raise _ApiError(409, CONFLICT)
        if generation != self._poll_generation:
            raise _ApiError(409, CONFLICT)
        return self.updates[:limit]

    def _wanted(self, update: Update) -> bool:
        kinds = set(update) - {"update_id"}
        if self.allowed_updates is None:
            return not kinds & _OPT_IN_UPDATES
        return bool(kinds & set(self.allowed_updates))

    def _checked_markup(self, params: dict[str, Any]) -> list[list[InlineKeyboardButton]]:
        """The inline keyboard in ``reply_markup`` (none: an empty one)."""
        markup = params.get("reply_markup")
        if markup is None:
            return []
        if isinstance(markup, str):
            try:
                markup = json.loads(markup)
            except ValueError:
                raise _bad("can't parse reply keyboard markup JSON object") from None
        rows = markup.get("inline_keyboard") if isinstance(markup, dict) else None
        if not isinstance(rows, list) or not all(isinstance(row, list) for row in rows):
            raise _bad("can't parse inline keyboard markup")
        for row in rows:
            for button in row:
                if not isinstance(button, dict) or not str(button.get("text") or "").strip():
                    raise _bad("BUTTON_TEXT_INVALID")
                actions = set(button) & _BUTTON_ACTIONS
                if len(actions) != 1:
                    raise _bad("can't parse inline keyboard button: exactly one action is needed")
                if "callback_data" in button:
                    data = button["callback_data"]
                    if not isinstance(data, str) or not 1 <= len(data.encode()) <= 64:
                        raise _bad("BUTTON_DATA_INVALID")
        # Checked: rows of buttons, each with a text and one action.
        return cast(list[list[InlineKeyboardButton]], [list(row) for row in rows])

    async def _answer_callback_query(self, params: dict[str, Any]) -> bool:
        query_id = str(params.get("callback_query_id") or "")
        if query_id not in self._open_queries:
            raise _bad("query is too old and response timeout expired or query ID is invalid")
        text = params.get("text")
        if text is not None and (not isinstance(text, str) or len(text) > 200):
            raise _bad("MESSAGE_TOO_LONG")
        self._open_queries.discard(query_id)
        # What the fake judges is checked; anything else is kept as sent.
        self.callback_answers[query_id] = cast(AnswerCallbackQueryParams, dict(params))
        return True

    def _checked_text(
        self, params: dict[str, Any], *, may_be_empty: bool = False
    ) -> tuple[str, tuple[MessageEntity, ...], str, str | None]:
        raw = params.get("text", "" if may_be_empty else None)
        if not isinstance(raw, str) or not (raw or may_be_empty):
            raise _bad("message text is empty")
        parse_mode = params.get("parse_mode") or None
        entities: tuple[MessageEntity, ...]
        if parse_mode is None:
            text, entities = raw, ()
        elif parse_mode == "MarkdownV2":
            try:
                parsed = parse_markdown_v2(raw)
            except MarkdownV2Error as exc:
                raise _bad(f"can't parse entities: {exc}") from None
            text, entities = parsed.text, parsed.entities
        else:
            # The fake implements MarkdownV2 only; say so rather than guess.
            raise _bad("unsupported parse_mode")
        if not text.strip() and not may_be_empty:
            raise _bad("message text is empty")
        if measure(text, "utf16") > MAX_LENGTH:
            raise _bad("message is too long")
        return text, entities, raw, parse_mode

    def _find(self, params: dict[str, Any]) -> FakeMessage | None:
        chat = str(params.get("chat_id"))
        message_id = _int_param(params, "message_id", -1)
        for message in self.messages.get(chat, []):
            if message.message_id == message_id and not message.deleted:
                return message
        return None

    async def _send_message(self, params: dict[str, Any]) -> Message:
        if "chat_id" not in params:
            raise _bad("chat_id is empty")
        chat = str(params["chat_id"])
        thread = self._thread(chat, params)
        text, entities, raw, parse_mode = self._checked_text(params)
        keyboard = self._checked_markup(params)
        message_id = self._next_message_id[chat]
        self._next_message_id[chat] += 1
        now = trio.current_time()
        message = FakeMessage(
            message_id, chat, text, entities, raw, parse_mode, now, thread, [text]
        )
        message.keyboard = keyboard
        self.messages[chat].append(message)
        return self._message_object(message)

    def chat_type(self, chat_id: int | str) -> ChatType:
        """The chat's type: as pushed, else what its id says (a user's
        private chat has the user's positive id; groups' ids are negative)."""
        key = str(chat_id)
        if key in self._chat_types:
            return self._chat_types[key]
        try:
            return "private" if int(key) > 0 else "group"
        except ValueError:
            return "channel"  # "@username" names a public chat or channel

    async def _send_message_draft(self, params: dict[str, Any]) -> bool:
        if params.get("chat_id") in (None, ""):
            raise _bad("chat_id is empty")
        if params.get("draft_id") in (None, ""):
            raise _bad('parameter "draft_id" is required')
        # Integers, which the Bot API also takes written as strings, like
        # every integer parameter; "@username" names a public chat, never a
        # private one.
        chat = str(params["chat_id"])
        draft_id = _int_param(params, "draft_id", 0)
        if draft_id == 0:
            raise _bad("draft_id must be non-zero")
        if self.chat_type(chat) != "private":
            raise _bad("TEXTDRAFT_PEER_INVALID")
        thread = self._thread(chat, params)
        text, _, raw, parse_mode = self._checked_text(params, may_be_empty=True)
        draft = FakeDraft(draft_id, chat, text, raw, parse_mode, trio.current_time(), thread)
        self.drafts[chat].append(draft)
        return True

    async def _edit_message_text(self, params: dict[str, Any]) -> Message:
        text, entities, raw, parse_mode = self._checked_text(params)
        keyboard = self._checked_markup(params)
        message = self._find(params)
        if message is None:
            raise _bad("message to edit not found")
        if message.text == text and message.entities == entities and message.keyboard == keyboard:
            raise _bad(NOT_MODIFIED[len("Bad Request: ") :])
        now = trio.current_time()
        if self.edit_limit is not None:
            times = self._edit_times[message.chat_id]
            while times and times[0] <= now - self.edit_window:
                times.popleft()
            if len(times) >= self.edit_limit:
                retry_after = max(1, math.ceil(times[0] + self.edit_window - now))
                raise _ApiError(
                    429,
                    f"Too Many Requests: retry after {retry_after}",
                    {"retry_after": retry_after},
                )
            times.append(now)
        message.text, message.entities = text, entities
        message.raw, message.parse_mode = raw, parse_mode
        message.keyboard = keyboard
        message.history.append(text)
        message.edited_at.append(now)
        return self._message_object(message)

    async def _delete_message(self, params: dict[str, Any]) -> bool:
        message = self._find(params)
        if message is None:
            raise _bad("message to delete not found")
        message.deleted = True
        return True

    def _thread(self, chat: str, params: dict[str, Any]) -> int | None:
        if "message_thread_id" not in params:
            return None
        thread = _int_param(params, "message_thread_id", 0)
        if (chat, thread) not in self._topics:
            raise _bad("message thread not found")
        return thread

    async def _send_chat_action(self, params: dict[str, Any]) -> bool:
        self._thread(str(params.get("chat_id")), params)
        action = params.get("action")
        if action not in CHAT_ACTIONS:
            raise _bad("wrong parameter action in request")
        self.chat_actions.append((str(params.get("chat_id")), str(action), trio.current_time()))
        return True

    def _message_object(self, message: FakeMessage) -> Message:
        obj: Message = {
            "message_id": message.message_id,
            "from": self.bot_user,
            "chat": _chat(message.chat_id, self.chat_type(message.chat_id)),
            "date": int(time.time()),
            "text": message.text,
        }
        if message.entities:
            obj["entities"] = list(message.entities)
        if message.edited_at:
            obj["edit_date"] = int(message.edited_at[-1])
        if message.keyboard:
            obj["reply_markup"] = {"inline_keyboard": message.keyboard}
        return obj


_METHODS: dict[str, Callable[[FakeTelegram, dict[str, Any]], Awaitable[Result]]] = {
    "getme": FakeTelegram._get_me,
    "getupdates": FakeTelegram._get_updates,
    "getfile": FakeTelegram._get_file,
    "sendmessage": FakeTelegram._send_message,
    "sendmessagedraft": FakeTelegram._send_message_draft,
    "editmessagetext": FakeTelegram._edit_message_text,
    "deletemessage": FakeTelegram._delete_message,
    "sendchataction": FakeTelegram._send_chat_action,
    "answercallbackquery": FakeTelegram._answer_callback_query,
}

# Update types Telegram sends only when asked for by name.
_OPT_IN_UPDATES = frozenset({"chat_member", "message_reaction", "message_reaction_count"})
_BUTTON_ACTIONS = frozenset(
    {
        "url",
        "callback_data",
        "web_app",
        "login_url",
        "switch_inline_query",
        "switch_inline_query_current_chat",
        "switch_inline_query_chosen_chat",
        "copy_text",
        "callback_game",
        "pay",
    }
)


def _user(user_id: int | str, first_name: str, user_name: str | None) -> User:
    """A human sender (``username`` only when ``user_name`` is given)."""
    sender: User = {"id": int(user_id), "is_bot": False, "first_name": first_name}
    if user_name:
        sender["username"] = user_name
    return sender


def _chat(chat_id: int | str, chat_type: ChatType) -> Chat:
    """The ``Chat`` object of a chat. Telegram's chat ids are numbers; a
    chat the fake knows only by its ``"@username"`` keeps that as its id."""
    try:
        return {"id": int(chat_id), "type": chat_type}
    except ValueError:
        return {"id": chat_id, "type": chat_type}  # type: ignore[typeddict-item]


def _int_param(params: dict[str, Any], name: str, default: int) -> int:
    value = params.get(name, default)
    try:
        return int(value)
    except (TypeError, ValueError):
        raise _bad(f'field "{name}" must be a valid Number') from None


def _error_response(code: int, description: str) -> FakeResponse:
    return FakeResponse.json({"ok": False, "error_code": code, "description": description}, code)


@asynccontextmanager
async def open_fake_telegram(
    token: str = "123456:TEST-token_abcdefghijklmnop",
    *,
    edit_limit: int | None = None,
    edit_window: float = 60.0,
    host: str = "127.0.0.1",
    port: int = 0,
    drafts_supported: bool = True,
) -> AsyncIterator[FakeTelegram]:
    """Run a fake Bot API; ``fake.base_url`` is the ``api_base_url`` to use."""
    fake = FakeTelegram(
        token, edit_limit=edit_limit, edit_window=edit_window, drafts_supported=drafts_supported
    )
    async with serve_http(fake.handle, host=host, port=port) as base_url:
        fake.base_url = base_url
        yield fake
