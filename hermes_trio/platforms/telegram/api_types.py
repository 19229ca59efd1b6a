"""The Telegram Bot API objects and method parameters the project uses, as
``TypedDict``s written after the Bot API reference
(https://core.telegram.org/bots/api): the adapter (``adapter.py``) and the
fake Bot API (``testing/fake_telegram.py``) share them, so both hold to one
contract.

A field the reference marks *Optional* is ``NotRequired``; only the fields
the project reads or writes (and those next to them in the reference that
it may meet) are written out. ``"from"`` is a Python keyword, so the objects
that carry it (``Message``, ``CallbackQuery``) use the functional syntax.

These are shapes, not checks: JSON from the network keeps being checked
field by field where it is read (a ``TypedDict`` is a plain dict at run time).
"""

# No ``from __future__ import annotations`` here: under it, Python 3.11
# counts every key of a class-syntax TypedDict as required, and
# ``__required_keys__``/``__optional_keys__`` should say what the reference says.
from typing import Generic, Literal, NotRequired, TypedDict, TypeVar

__all__ = [
    "Animation",
    "AnswerCallbackQueryParams",
    "ApiError",
    "ApiOk",
    "ApiParams",
    "Audio",
    "CallbackGame",
    "CallbackQuery",
    "Chat",
    "ChatAction",
    "ChatType",
    "CopyTextButton",
    "DeleteMessageParams",
    "Document",
    "EditMessageTextParams",
    "File",
    "GetFileParams",
    "GetUpdatesParams",
    "InlineKeyboardButton",
    "InlineKeyboardMarkup",
    "LoginUrl",
    "Message",
    "MessageEntity",
    "MessageEntityType",
    "ParseMode",
    "PhotoSize",
    "ResponseParameters",
    "SendChatActionParams",
    "SendMessageDraftParams",
    "SendMessageParams",
    "Sticker",
    "SwitchInlineQueryChosenChat",
    "TextParams",
    "Update",
    "UpdateContent",
    "User",
    "Video",
    "VideoNote",
    "Voice",
    "WebAppInfo",
]

ChatType = Literal["private", "group", "supergroup", "channel"]
ParseMode = Literal["MarkdownV2", "HTML", "Markdown"]
ChatAction = Literal[
    "typing",
    "upload_photo",
    "record_video",
    "upload_video",
    "record_voice",
    "upload_voice",
    "upload_document",
    "choose_sticker",
    "find_location",
    "record_video_note",
    "upload_video_note",
]
MessageEntityType = Literal[
    "mention",
    "hashtag",
    "cashtag",
    "bot_command",
    "url",
    "email",
    "phone_number",
    "bold",
    "italic",
    "underline",
    "strikethrough",
    "spoiler",
    "blockquote",
    "expandable_blockquote",
    "code",
    "pre",
    "text_link",
    "text_mention",
    "custom_emoji",
]


# -- objects -------------------------------------------------------------------


class User(TypedDict):
    """A Telegram user or bot (``getMe`` answers the bot's own)."""

    id: int
    is_bot: bool
    first_name: str
    last_name: NotRequired[str]
    username: NotRequired[str]
    language_code: NotRequired[str]


class Chat(TypedDict):
    id: int
    type: ChatType
    title: NotRequired[str]
    username: NotRequired[str]
    first_name: NotRequired[str]
    last_name: NotRequired[str]
    #: A supergroup with forum topics.
    is_forum: NotRequired[bool]


class MessageEntity(TypedDict):
    """A formatted span of a text; ``offset`` and ``length`` in UTF-16 code units."""

    type: MessageEntityType
    offset: int
    length: int
    #: ``text_link``: the URL opened.
    url: NotRequired[str]
    #: ``text_mention``: the user mentioned.
    user: NotRequired[User]
    #: ``pre``: the programming language of the block.
    language: NotRequired[str]
    #: ``custom_emoji``: the emoji's id.
    custom_emoji_id: NotRequired[str]


class PhotoSize(TypedDict):
    """One size of a photo (a message's ``photo`` lists them smallest first)."""

    file_id: str
    file_unique_id: str
    width: int
    height: int
    file_size: NotRequired[int]


class Document(TypedDict):
    file_id: str
    file_unique_id: str
    thumbnail: NotRequired[PhotoSize]
    file_name: NotRequired[str]
    mime_type: NotRequired[str]
    file_size: NotRequired[int]


class Audio(TypedDict):
    file_id: str
    file_unique_id: str
    duration: int
    performer: NotRequired[str]
    title: NotRequired[str]
    file_name: NotRequired[str]
    mime_type: NotRequired[str]
    file_size: NotRequired[int]


class Voice(TypedDict):
    file_id: str
    file_unique_id: str
    duration: int
    mime_type: NotRequired[str]
    file_size: NotRequired[int]


class Video(TypedDict):
    file_id: str
    file_unique_id: str
    width: int
    height: int
    duration: int
    file_name: NotRequired[str]
    mime_type: NotRequired[str]
    file_size: NotRequired[int]


class VideoNote(TypedDict):
    file_id: str
    file_unique_id: str
    #: Width and height (a video note is square).
    length: int
    duration: int
    file_size: NotRequired[int]


class Animation(TypedDict):
    """A GIF or H.264/MPEG-4 AVC video without sound."""

    file_id: str
    file_unique_id: str
    width: int
    height: int
    duration: int
    file_name: NotRequired[str]
    mime_type: NotRequired[str]
    file_size: NotRequired[int]


class Sticker(TypedDict):
    file_id: str
    file_unique_id: str
    type: Literal["regular", "mask", "custom_emoji"]
    width: int
    height: int
    #: A TGS (Lottie) sticker.
    is_animated: bool
    #: A WEBM video sticker.
    is_video: bool
    emoji: NotRequired[str]
    set_name: NotRequired[str]
    file_size: NotRequired[int]


class File(TypedDict):
    """``getFile``'s answer; the bytes are at
    ``{api_base_url}/file/bot<token>/<file_path>``."""

    file_id: str
    file_unique_id: str
    file_size: NotRequired[int]
    file_path: NotRequired[str]


class WebAppInfo(TypedDict):
    url: str


class LoginUrl(TypedDict):
    url: str
    forward_text: NotRequired[str]
    bot_username: NotRequired[str]
    request_write_access: NotRequired[bool]


class SwitchInlineQueryChosenChat(TypedDict):
    query: NotRequired[str]
    allow_user_chats: NotRequired[bool]
    allow_bot_chats: NotRequired[bool]
    allow_group_chats: NotRequired[bool]
    allow_channel_chats: NotRequired[bool]


class CopyTextButton(TypedDict):
    text: str


class CallbackGame(TypedDict):
    """A placeholder; the Bot API gives it no fields."""


class InlineKeyboardButton(TypedDict):
    """A button under a message: a non-empty ``text`` and exactly one action."""

    text: str
    url: NotRequired[str]
    #: 1–64 bytes, sent back in the ``CallbackQuery`` a press makes.
    callback_data: NotRequired[str]
    web_app: NotRequired[WebAppInfo]
    login_url: NotRequired[LoginUrl]
    switch_inline_query: NotRequired[str]
    switch_inline_query_current_chat: NotRequired[str]
    switch_inline_query_chosen_chat: NotRequired[SwitchInlineQueryChosenChat]
    copy_text: NotRequired[CopyTextButton]
    callback_game: NotRequired[CallbackGame]
    pay: NotRequired[bool]


class InlineKeyboardMarkup(TypedDict):
    #: Rows of buttons.
    inline_keyboard: list[list[InlineKeyboardButton]]


Message = TypedDict(
    "Message",
    {
        "message_id": int,
        #: The forum topic (or, on a reply, the thread) the message is in.
        "message_thread_id": NotRequired[int],
        #: The sender; empty for messages sent to channels.
        "from": NotRequired[User],
        "chat": Chat,
        #: Unix time; 0 for an inaccessible message.
        "date": int,
        "edit_date": NotRequired[int],
        "is_topic_message": NotRequired[bool],
        "text": NotRequired[str],
        "entities": NotRequired[list[MessageEntity]],
        "caption": NotRequired[str],
        "caption_entities": NotRequired[list[MessageEntity]],
        #: The sizes of a photo, smallest first.
        "photo": NotRequired[list[PhotoSize]],
        "document": NotRequired[Document],
        "audio": NotRequired[Audio],
        "voice": NotRequired[Voice],
        "video": NotRequired[Video],
        "video_note": NotRequired[VideoNote],
        "animation": NotRequired[Animation],
        "sticker": NotRequired[Sticker],
        "reply_markup": NotRequired[InlineKeyboardMarkup],
    },
)
"""A message. The reference's ``InaccessibleMessage`` (a ``CallbackQuery``'s
message the bot can no longer see) has just ``chat``, ``message_id`` and
``date`` 0, the required fields here, so it is a ``Message`` too."""

CallbackQuery = TypedDict(
    "CallbackQuery",
    {
        "id": str,
        #: Who pressed the button.
        "from": User,
        #: The message the button was under (absent for inline-mode messages).
        "message": NotRequired[Message],
        "inline_message_id": NotRequired[str],
        "chat_instance": str,
        #: The button's ``callback_data``.
        "data": NotRequired[str],
        "game_short_name": NotRequired[str],
    },
)
"""A press on an inline keyboard button; answer it with ``answerCallbackQuery``."""


class UpdateContent(TypedDict, total=False):
    """What an ``Update`` carries besides its id: one of these at most."""

    message: Message
    edited_message: Message
    channel_post: Message
    edited_channel_post: Message
    callback_query: CallbackQuery


class Update(UpdateContent):
    """One item of ``getUpdates``' answer."""

    update_id: int


class ResponseParameters(TypedDict, total=False):
    """Why a request failed and how to do it right."""

    #: The group became this supergroup.
    migrate_to_chat_id: int
    #: Seconds to wait after a 429.
    retry_after: int


# -- answers -------------------------------------------------------------------

ResultT = TypeVar("ResultT")


class ApiOk(TypedDict, Generic[ResultT]):
    """A successful answer: ``{"ok": true, "result": ...}``."""

    ok: Literal[True]
    result: ResultT
    description: NotRequired[str]


class ApiError(TypedDict):
    """A failed answer (HTTP status = ``error_code``)."""

    ok: Literal[False]
    error_code: int
    description: str
    parameters: NotRequired[ResponseParameters]


# -- method parameters ------------------------------------------------------------


class GetUpdatesParams(TypedDict, total=False):
    #: One past the last ``update_id`` handled: confirms every update below it.
    offset: int
    #: 1–100.
    limit: int
    #: Seconds to long-poll.
    timeout: int
    allowed_updates: list[str]


class GetFileParams(TypedDict):
    file_id: str


class SendMessageParams(TypedDict):
    #: A chat's id, or ``"@channelusername"``.
    chat_id: int | str
    message_thread_id: NotRequired[int]
    text: str
    parse_mode: NotRequired[ParseMode]
    entities: NotRequired[list[MessageEntity]]
    disable_notification: NotRequired[bool]
    #: The reference allows reply keyboards too; the project sends inline ones.
    reply_markup: NotRequired[InlineKeyboardMarkup]


class EditMessageTextParams(TypedDict):
    """``chat_id`` with ``message_id``, or ``inline_message_id``. Without
    ``reply_markup`` the message's inline keyboard goes away."""

    chat_id: NotRequired[int | str]
    message_id: NotRequired[int]
    inline_message_id: NotRequired[str]
    text: str
    parse_mode: NotRequired[ParseMode]
    entities: NotRequired[list[MessageEntity]]
    reply_markup: NotRequired[InlineKeyboardMarkup]


class SendMessageDraftParams(TypedDict):
    """Bot API 9.x: stream a partial message to a private chat."""

    #: The reference takes a private chat's (integer) id; the adapter passes
    #: the chat it was given, and Telegram refuses any other with a 400.
    chat_id: int | str
    message_thread_id: NotRequired[int]
    #: Non-zero; changes of drafts with the same id are animated.
    draft_id: int
    #: 0–4096 characters after entities parsing; empty shows "Thinking…".
    text: str
    parse_mode: NotRequired[ParseMode]
    entities: NotRequired[list[MessageEntity]]


class DeleteMessageParams(TypedDict):
    chat_id: int | str
    message_id: int


class SendChatActionParams(TypedDict):
    chat_id: int | str
    message_thread_id: NotRequired[int]
    action: ChatAction


class AnswerCallbackQueryParams(TypedDict):
    callback_query_id: str
    #: A notice shown to the user, 0–200 characters.
    text: NotRequired[str]
    show_alert: NotRequired[bool]
    url: NotRequired[str]
    cache_time: NotRequired[int]


#: The methods that send a text (converted to MarkdownV2 or sent plain).
TextParams = SendMessageParams | EditMessageTextParams | SendMessageDraftParams
#: Parameters of every method the project calls (``getMe`` takes none).
ApiParams = (
    GetUpdatesParams
    | GetFileParams
    | TextParams
    | DeleteMessageParams
    | SendChatActionParams
    | AnswerCallbackQueryParams
)
