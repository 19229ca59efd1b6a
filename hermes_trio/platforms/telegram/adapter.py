"""Telegram over the Bot API, on httpx (so it runs under trio).

Every call is ``POST {api_base_url}/bot{token}/{method}`` with a JSON body;
answers are ``{"ok": true, "result": ...}`` or ``{"ok": false, "error_code",
"description", "parameters"}``. Inbound messages arrive by long polling
``getUpdates``; the adapter keeps the offset (last ``update_id`` + 1) on the
instance, so a restarted ``run`` continues where the previous one stopped and
no update is handed over twice. Telegram itself only forgets an update when a
later ``getUpdates`` asks from past it, so when ``run`` stops it confirms
what it handled since its last poll (one quick call, shielded and bounded):
a new process, starting without an offset, then does not get the last
message again.

A message in a forum topic carries the topic as its ``thread_id``, and the
answer goes to the same topic. Photos and files become attachments whose
bytes are fetched (``getFile``, then the file URL) only when the gateway
uses them; the caption is the text.

Outgoing text is converted from common Markdown to MarkdownV2. If Telegram
still refuses the markup ("can't parse entities"), the same call is repeated
as plain text with the original text.

Streaming (``transport``, from ``platforms.telegram.transport`` or
``streaming.transport``): where drafts are used — ``auto``: private chats
(a positive chat id is a user), ``draft``: every chat — the messenger is a
``TelegramDraftMessenger``: the growing answer is ``sendMessageDraft`` with
one random ``draft_id`` per answer, the final text ``sendMessage``. A
draft the Bot API refuses turns drafts off: for that chat on a 400 (not a
private chat, a bot without the feature), for every chat on a 404 (a Bot
API server that does not know the method); each is logged once, and the
editor goes on with edits (``DraftRefused``).

The bot token is part of every URL, so it must never reach a log line or an
exception message: the adapter never logs URLs, redacts the token from every
error it raises (httpx puts URLs in its exceptions), and installs a filter on
the ``httpx`` logger, which logs each request URL at INFO.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from typing import Any, cast

import httpx
import trio

from ...config import TelegramConfig
from ...consumers.messenger import (
    Button,
    Capabilities,
    DraftRefused,
    PlatformError,
    RateLimited,
)
from ...redaction import redact, register_secret
from ...retry import Backoff, parse_retry_after
from ..base import Attachment, ButtonPress, CredentialsRejected, InboundMessage
from ..http import allow_list, download, send_request, user_allowed
from .api_types import (
    AnswerCallbackQueryParams,
    ApiParams,
    CallbackQuery,
    DeleteMessageParams,
    EditMessageTextParams,
    GetUpdatesParams,
    InlineKeyboardMarkup,
    Message,
    SendChatActionParams,
    SendMessageDraftParams,
    SendMessageParams,
    TextParams,
    User,
)
from .format import to_markdown_v2

__all__ = [
    "TELEGRAM_CAPABILITIES",
    "TELEGRAM_DRAFT_CAPABILITIES",
    "TelegramAdapter",
    "TelegramApiError",
    "TelegramDraftMessenger",
    "TelegramMessenger",
    "TokenRejected",
]

log = logging.getLogger("hermes_trio.platforms.telegram")

TELEGRAM_CAPABILITIES = Capabilities(
    can_edit=True, max_length=4096, length_unit="utf16", buttons=True
)
# A draft takes the same 4096 characters; the cursor stays reserved in case
# the chat turns to edits.
TELEGRAM_DRAFT_CAPABILITIES = Capabilities(
    can_edit=True, max_length=4096, length_unit="utf16", drafts=True, buttons=True
)
# The confirming call on stop answers at once (timeout 0); this only bounds
# an unreachable Bot API, so stopping stays quick.
CONFIRM_TIMEOUT = 3.0


class TokenRejected(CredentialsRejected):
    """Telegram answered 401: the bot token is wrong or revoked."""


class TelegramApiError(PlatformError):
    """Telegram answered ``ok: false``; ``error_code`` and ``description``
    are its own (``str()`` adds the method)."""

    def __init__(self, method: str, error_code: int, description: str) -> None:
        super().__init__(f"telegram {method}: {description}")
        self.method = method
        self.error_code = error_code
        self.description = description


class _EntitiesRejected(TelegramApiError):
    """400 "can't parse entities": the MarkdownV2 markup was refused."""


def _chat_ref(chat_id: str) -> int | str:
    try:
        return int(chat_id)
    except ValueError:
        return chat_id  # "@channelusername"


def _message_ref(message_id: str) -> int:
    try:
        return int(message_id)
    except ValueError:
        raise PlatformError(
            f"telegram: message id must be an integer, got {message_id!r}"
        ) from None


class TelegramAdapter:
    """Long-polls the Bot API and hands out one ``TelegramMessenger`` per chat.

    ``client`` is shared and owned by the caller. ``markdown=False`` sends
    plain text only. Backoff after a failed poll starts at
    ``backoff_initial`` seconds and doubles up to ``backoff_max``.

    ``filter_users=True`` drops messages from users outside a non-empty
    ``allowed_users`` here. The gateway passes False and enforces the
    allow-list itself, because only it can answer the refused user.
    """

    name = "telegram"

    def __init__(
        self,
        config: TelegramConfig,
        client: httpx.AsyncClient,
        *,
        markdown: bool = True,
        request_timeout: float = 30.0,
        backoff_initial: float = 1.0,
        backoff_max: float = 30.0,
        filter_users: bool = True,
    ) -> None:
        if not config.token:
            raise PlatformError(
                "telegram: no bot token configured "
                "(set platforms.telegram.token or TELEGRAM_BOT_TOKEN)"
            )
        self.config = config
        self._client = client
        self._token = config.token
        # The token is in every URL: httpx's log lines and errors carry it.
        register_secret(config.token)
        self._base = config.api_base_url.rstrip("/")
        self.markdown = markdown
        self.request_timeout = request_timeout
        self.backoff_initial = backoff_initial
        self.backoff_max = backoff_max
        self._allowed = allow_list(config.allowed_users, filter_users)
        self._offset: int | None = None
        # The offset of the last getUpdates Telegram answered: updates below
        # it are confirmed on its side.
        self._confirmed: int | None = None
        self.bot_user: User | None = None
        self.transport = config.transport or "auto"
        # Chats whose drafts Telegram refused (400), and whether the Bot API
        # server does not know drafts at all (404): edits there from then on.
        self._no_drafts: set[str] = set()
        self.drafts_unknown = False

    def __repr__(self) -> str:
        return f"<TelegramAdapter {self._base}>"

    @property
    def offset(self) -> int | None:
        """The next ``getUpdates`` offset (last handled ``update_id`` + 1)."""
        return self._offset

    # -- low level ---------------------------------------------------------

    async def call(
        self,
        method: str,
        params: ApiParams | None = None,
        *,
        http_timeout: float | None = None,
    ) -> Any:
        """Call a Bot API method; returns ``result`` as the JSON came (the
        caller checks what it reads) or raises ``PlatformError``
        (``RateLimited`` for 429, ``TokenRejected`` for 401). ``http_timeout``
        is httpx's per-request timeout (a long poll needs more than a send)."""
        url = f"{self._base}/bot{self._token}/{method}"
        response = await send_request(
            self._client,
            "POST",
            url,
            what=f"telegram {method}",
            request_timeout=http_timeout or self.request_timeout,
            name_if_empty=True,
            json=params or {},
        )
        try:
            body = response.json()
        except ValueError:
            body = None
        if not isinstance(body, dict):
            if response.status_code == 401:
                raise TokenRejected(_TOKEN_REJECTED) from None
            raise PlatformError(
                f"telegram {method}: HTTP {response.status_code} with a non-JSON answer"
            )
        if body.get("ok") is True and response.status_code < 400:
            return body.get("result")
        code = body.get("error_code")
        if not isinstance(code, int):
            code = response.status_code
        description = redact(str(body.get("description") or f"HTTP {response.status_code}"))
        parameters = body.get("parameters")
        if not isinstance(parameters, dict):
            parameters = {}
        if code == 429 or response.status_code == 429:
            retry_after = parameters.get("retry_after")
            if not isinstance(retry_after, int | float):
                # ``or``: a header asking for no wait at all gets the default too.
                retry_after = parse_retry_after(response.headers.get("retry-after")) or 1.0
            raise RateLimited(float(retry_after), f"telegram {method}: {description}")
        if code == 401 or response.status_code == 401:
            raise TokenRejected(_TOKEN_REJECTED)
        if code == 400 and "can't parse entities" in description.lower():
            raise _EntitiesRejected(method, code, description)
        if "migrate_to_chat_id" in parameters:
            description += f" (the group is now chat {parameters['migrate_to_chat_id']})"
        raise TelegramApiError(method, code, description)

    async def download(self, file_id: str) -> bytes:
        """The bytes of a file a user sent (``getFile``, then its URL)."""
        info = await self.call("getFile", {"file_id": file_id})
        path = info.get("file_path") if isinstance(info, dict) else None
        if not isinstance(path, str):
            raise PlatformError("telegram getFile: the file is not available for download")
        return await download(
            self._client,
            f"{self._base}/file/bot{self._token}/{path}",
            what="telegram file download",
            request_timeout=self.request_timeout,
            name_if_empty=True,
        )

    async def get_me(self) -> User:
        answer = await self.call("getMe")
        if not isinstance(answer, dict):
            raise PlatformError("telegram getMe: answer without a bot user")
        me = cast(User, answer)
        self.bot_user = me
        return me

    async def whoami(self) -> str:
        me = await self.get_me()
        return f"@{me.get('username') or me.get('id')}"

    # -- inbound -----------------------------------------------------------

    async def run(
        self,
        inbound: trio.MemorySendChannel[InboundMessage],
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Poll for messages until cancelled.

        A rejected token raises ``TokenRejected`` at once (before
        ``task_status.started()`` when it shows up in the first call).
        Network trouble is logged and retried with backoff: Telegram being
        unreachable at startup does not hold up whoever started us.
        """
        try:
            me = await self.get_me()
            log.info("telegram: polling as @%s", me.get("username", "?"))
        except TokenRejected:
            raise
        except PlatformError as exc:
            if isinstance(exc, TelegramApiError) and exc.error_code == 404:
                # The Bot API answers 404 to a malformed token (and a wrong
                # api_base_url looks the same): polling would never work.
                raise TokenRejected(
                    "telegram: the Bot API does not know this bot token (404 Not Found); "
                    "check platforms.telegram.token and platforms.telegram.api_base_url"
                ) from None
            log.warning("telegram: could not reach the Bot API yet (%s); will keep trying", exc)
        task_status.started()
        try:
            await self._poll(inbound)
        finally:
            await self._confirm_handled()

    async def _poll(self, inbound: trio.MemorySendChannel[InboundMessage]) -> None:
        backoff = Backoff(self.backoff_initial, self.backoff_max)
        # One warning when polling starts failing and one line when it works
        # again: an outage of an hour must not write a line per retry.
        outage_since: float | None = None
        while True:
            params: GetUpdatesParams = {
                "timeout": self.config.poll_timeout,
                # callback_query: presses on the buttons the bot sent.
                "allowed_updates": ["message", "callback_query"],
            }
            if self._offset is not None:
                params["offset"] = self._offset
            try:
                updates = await self.call(
                    "getUpdates", params, http_timeout=self.config.poll_timeout + 15.0
                )
            except TokenRejected:
                raise
            except RateLimited as exc:
                log.warning("telegram: getUpdates rate limited; waiting %g s", exc.retry_after)
                await trio.sleep(exc.retry_after)
                continue
            except PlatformError as exc:
                delay = backoff.next()
                if outage_since is None:
                    outage_since = trio.current_time()
                    log.warning(
                        "telegram: polling failed (%s); retrying with backoff (at most %g s apart)",
                        exc,
                        self.backoff_max,
                    )
                else:
                    log.debug("telegram: polling failed again (%s); retrying in %g s", exc, delay)
                await trio.sleep(delay)
                continue
            if outage_since is not None:
                log.info(
                    "telegram: polling works again after %.0f s",
                    trio.current_time() - outage_since,
                )
                outage_since = None
            self._confirmed = params.get("offset")
            if not isinstance(updates, list):
                log.warning("telegram: getUpdates answered %s, not a list", type(updates).__name__)
                await trio.sleep(backoff.upcoming)
                continue
            backoff.reset()
            for update in updates:
                try:
                    await self._handle_update(update, inbound)
                except trio.BrokenResourceError:
                    log.info("telegram: inbound channel closed; stopping")
                    return

    async def _confirm_handled(self) -> None:
        """Confirm updates handled since the last answered poll, if any."""
        if self._offset is None or self._offset == self._confirmed:
            return
        with trio.move_on_after(CONFIRM_TIMEOUT, shield=True) as scope:
            try:
                await self.call("getUpdates", {"offset": self._offset, "timeout": 0, "limit": 1})
            except PlatformError as exc:
                log.warning(
                    "telegram: could not confirm the handled updates (%s); "
                    "the next start may receive them again",
                    exc,
                )
                return
            self._confirmed = self._offset
        if scope.cancelled_caught:
            log.warning(
                "telegram: could not confirm the handled updates in time; "
                "the next start may receive them again"
            )

    async def _handle_update(
        self, update: object, inbound: trio.MemorySendChannel[InboundMessage]
    ) -> None:
        """One item of ``getUpdates``' answer (an ``Update``, unchecked)."""
        if not isinstance(update, dict):
            return
        update_id = update.get("update_id")
        message = _to_inbound(update.get("message"), self._fetcher)
        if message is None:
            message = self._press(update.get("callback_query"))
        # allowed_users are ints in the config, so compare as ints. A press
        # passes: the approval decides whether it counts (an approver need
        # not talk to the bot) and acknowledges it either way.
        if (
            message is not None
            and message.press is None
            and not user_allowed(self._allowed, message.user_id, int)
        ):
            log.info("telegram: ignoring a message from user %s (not allowed)", message.user_id)
            message = None
        if message is not None:
            # A send that completes has delivered; one that is cancelled has
            # not. So the offset moves only after a completed send: nothing is
            # lost to cancellation and nothing is handed over twice.
            await inbound.send(message)
        if isinstance(update_id, int):
            self._offset = max(self._offset or 0, update_id + 1)

    def _press(self, raw: object) -> InboundMessage | None:
        """A ``callback_query``: someone pressed one of our inline buttons."""
        if not isinstance(raw, dict) or not isinstance(raw.get("id"), str):
            return None
        query = cast(CallbackQuery, raw)
        sender = query.get("from") or {}
        message = query.get("message")
        chat = message.get("chat") if message else None
        if "id" not in sender or not message or not chat or "id" not in chat:
            return None
        message_id = message.get("message_id")
        return InboundMessage(
            platform="telegram",
            chat_id=str(chat["id"]),
            user_id=str(sender["id"]),
            text="",
            message_id=None if message_id is None else str(message_id),
            user_name=_user_name(sender),
            raw=raw,
            thread_id=_topic(message),
            press=ButtonPress(
                data=str(query.get("data") or ""),
                message_id=None if message_id is None else str(message_id),
                acknowledge=partial(self._answer_callback, query["id"]),
            ),
        )

    async def _answer_callback(self, query_id: str, notice: str | None) -> None:
        # Telegram shows a spinner on the button until the query is answered.
        params: AnswerCallbackQueryParams = {"callback_query_id": query_id}
        if notice:
            params["text"] = notice[:200]
        await self.call("answerCallbackQuery", params)

    def _fetcher(self, file_id: str) -> Callable[[], Awaitable[bytes]]:
        return partial(self.download, file_id)

    # -- outbound ----------------------------------------------------------

    def messenger(self, chat_id: str, thread_id: str | None = None) -> TelegramMessenger:
        chat_id = str(chat_id)
        if self.drafts_in(chat_id):
            return TelegramDraftMessenger(self, chat_id, thread_id)
        return TelegramMessenger(self, chat_id, thread_id)

    def drafts_in(self, chat_id: str) -> bool:
        """Whether answers in ``chat_id`` are streamed as drafts now."""
        if self.transport == "edit" or self.drafts_unknown or chat_id in self._no_drafts:
            return False
        if self.transport == "draft":
            return True
        # auto: private chats only. A private chat's id is its user's id,
        # positive; groups, supergroups and channels have negative ids.
        ref = _chat_ref(chat_id)
        return isinstance(ref, int) and ref > 0

    def drafts_refused(self, chat_id: str, exc: TelegramApiError) -> None:
        """Telegram refused a draft: edits from now on, there or everywhere."""
        if exc.error_code == 404:
            if not self.drafts_unknown:
                self.drafts_unknown = True
                log.warning(
                    "telegram: the Bot API server does not offer sendMessageDraft (%s); "
                    "editing messages instead in every chat",
                    exc.description,
                )
            return
        if chat_id not in self._no_drafts:
            self._no_drafts.add(chat_id)
            log.warning(
                "telegram: chat %s refused a draft (%s); editing messages there instead",
                chat_id,
                exc.description,
            )


_TOKEN_REJECTED = (
    "telegram: the bot token was rejected (401 Unauthorized); "
    "check platforms.telegram.token / TELEGRAM_BOT_TOKEN"
)


# Kinds of media a user can send, with the type to report when the Bot API
# gives none (photos are always JPEG; the others say theirs).
_MEDIA: dict[str, str | None] = {
    "document": None,
    "audio": "audio/mpeg",
    "voice": "audio/ogg",
    "video": "video/mp4",
    "video_note": "video/mp4",
    "animation": "video/mp4",
    "sticker": None,
}


def _attachments(
    message: Message, fetcher: Callable[[str], Callable[[], Awaitable[bytes]]]
) -> tuple[Attachment, ...]:
    found: list[Attachment] = []
    photo = message.get("photo")
    if isinstance(photo, list) and photo and isinstance(photo[-1], dict):
        largest = photo[-1]  # sizes come smallest first
        if isinstance(largest.get("file_id"), str):
            found.append(
                Attachment(
                    "image/jpeg", "photo.jpg", largest.get("file_size"), fetcher(largest["file_id"])
                )
            )
    for kind, default_type in _MEDIA.items():
        media = message.get(kind)
        if not isinstance(media, dict) or not isinstance(media.get("file_id"), str):
            continue
        mime = media.get("mime_type") or default_type
        if kind == "sticker":
            animated = media.get("is_animated") or media.get("is_video")
            mime = "application/x-tgsticker" if animated else "image/webp"
        name = media.get("file_name") or kind
        found.append(Attachment(mime, name, media.get("file_size"), fetcher(media["file_id"])))
    return tuple(found)


def _to_inbound(
    raw: object, fetcher: Callable[[str], Callable[[], Awaitable[bytes]]]
) -> InboundMessage | None:
    """An update's ``message`` (unchecked), if it is one to answer."""
    if not isinstance(raw, dict):
        return None
    message = cast(Message, raw)
    text = message.get("text", message.get("caption", ""))
    chat = message.get("chat") or {}
    sender = message.get("from")
    if not isinstance(text, str) or "id" not in chat or (sender and sender.get("is_bot")):
        return None
    attachments = _attachments(message, fetcher)
    if not text and not attachments:
        return None  # a service message (a member joined, a pin, …)
    user_id = sender.get("id", chat["id"]) if sender else chat["id"]
    return InboundMessage(
        platform="telegram",
        chat_id=str(chat["id"]),
        user_id=str(user_id),
        text=text,
        message_id=str(message["message_id"]) if "message_id" in message else None,
        user_name=_user_name(sender),
        raw=raw,
        thread_id=_topic(message),
        attachments=attachments,
        sent_at=float(message["date"]) if isinstance(message.get("date"), int) else None,
    )


def _user_name(user: User | None) -> str | None:
    """The sender's username, else their full name; None when neither is given."""
    if not user:
        return None
    name = user.get("username") or " ".join(
        part for part in (user.get("first_name"), user.get("last_name")) if part
    )
    return name or None


def _topic(message: Message) -> str | None:
    """The forum topic the message is in. Other chats set
    ``message_thread_id`` too (on replies), but only a topic can be sent to."""
    thread = message.get("message_thread_id")
    if message.get("is_topic_message") and isinstance(thread, int):
        return str(thread)
    return None


class TelegramMessenger:
    """Sending to one Telegram chat. ``edit`` treats "message is not
    modified" as success; markup Telegram refuses is resent as plain text."""

    capabilities = TELEGRAM_CAPABILITIES

    def __init__(
        self, adapter: TelegramAdapter, chat_id: str, thread_id: str | None = None
    ) -> None:
        self._adapter = adapter
        self.chat_id = chat_id
        self.thread_id = thread_id
        # New messages (and the typing sign) go to the forum topic asked in;
        # an edit names its message, which already is there.
        self._chat = _chat_ref(chat_id)
        self._thread = None if thread_id is None else _message_ref(thread_id)

    def __repr__(self) -> str:
        topic = f" topic={self.thread_id}" if self.thread_id is not None else ""
        return f"<TelegramMessenger chat={self.chat_id}{topic}>"

    def _new_message(self, text: str) -> SendMessageParams:
        """``sendMessage`` to this chat (and topic) with plain ``text``."""
        if self._thread is None:
            return {"chat_id": self._chat, "text": text}
        return {"chat_id": self._chat, "message_thread_id": self._thread, "text": text}

    async def _call_text(self, method: str, params: TextParams) -> Any:
        """Call ``method`` with ``params``' plain text converted to
        MarkdownV2; as given (plain text) when ``markdown`` is off or
        Telegram refuses the markup."""
        if self._adapter.markdown:
            marked = params.copy()
            marked["text"] = to_markdown_v2(params["text"])
            marked["parse_mode"] = "MarkdownV2"
            try:
                return await self._adapter.call(method, marked)
            except _EntitiesRejected as exc:
                log.warning("%s; sending as plain text", exc)
        return await self._adapter.call(method, params)

    async def send(self, text: str) -> str:
        result: Message = await self._call_text("sendMessage", self._new_message(text))
        return str(result["message_id"])

    async def edit(self, message_id: str, text: str, *, final: bool = False) -> None:
        params: EditMessageTextParams = {
            "chat_id": _chat_ref(self.chat_id),
            "message_id": _message_ref(message_id),
            "text": text,
        }
        try:
            await self._call_text("editMessageText", params)
        except TelegramApiError as exc:
            if "message is not modified" in exc.description:
                return
            raise

    async def send_buttons(self, text: str, buttons: Sequence[Button]) -> str:
        keyboard: InlineKeyboardMarkup = {
            "inline_keyboard": [
                [{"text": button.label, "callback_data": button.data} for button in buttons]
            ]
        }
        params = self._new_message(text)
        params["reply_markup"] = keyboard
        result: Message = await self._call_text("sendMessage", params)
        return str(result["message_id"])

    async def close_buttons(self, message_id: str, text: str) -> None:
        # An edit without reply_markup takes the inline keyboard away.
        await self.edit(message_id, text, final=True)

    async def delete(self, message_id: str) -> None:
        params: DeleteMessageParams = {
            "chat_id": _chat_ref(self.chat_id),
            "message_id": _message_ref(message_id),
        }
        try:
            await self._adapter.call("deleteMessage", params)
        except TelegramApiError as exc:
            # Already gone is what we wanted.
            if "message to delete not found" in exc.description:
                return
            raise

    async def typing(self) -> None:
        params: SendChatActionParams = {"chat_id": self._chat, "action": "typing"}
        if self._thread is not None:
            params["message_thread_id"] = self._thread
        await self._adapter.call("sendChatAction", params)


class TelegramDraftMessenger(TelegramMessenger):
    """A chat whose answers grow in a draft (``sendMessageDraft``), one
    ``draft_id`` per messenger, which the gateway makes per answer; messages
    are sent and edited as in ``TelegramMessenger``."""

    capabilities = TELEGRAM_DRAFT_CAPABILITIES

    def __init__(
        self, adapter: TelegramAdapter, chat_id: str, thread_id: str | None = None
    ) -> None:
        super().__init__(adapter, chat_id, thread_id)
        # Non-zero; random, so a restarted gateway's answer does not animate
        # from a draft of the previous process.
        self.draft_id = secrets.randbelow(2**31 - 1) + 1

    def __repr__(self) -> str:
        return super().__repr__()[:-1] + f" draft={self.draft_id}>"

    async def draft(self, text: str) -> None:
        params: SendMessageDraftParams = {
            "chat_id": self._chat,
            "draft_id": self.draft_id,
            "text": text,
        }
        if self._thread is not None:
            params["message_thread_id"] = self._thread
        try:
            await self._call_text("sendMessageDraft", params)
        except TelegramApiError as exc:
            # 400: this chat cannot have drafts (not private, the feature is
            # off for the bot); 404: the server does not know the method.
            if exc.error_code in (400, 404):
                self._adapter.drafts_refused(self.chat_id, exc)
                raise DraftRefused(str(exc)) from None
            raise
