"""Chat Completions' response objects as this package writes them, after
OpenAI's OpenAPI spec (``CreateChatCompletionResponse``,
``CreateChatCompletionStreamResponse``, ``CompletionUsage``, ``Model``;
``tests/spec/openai_schemas.json`` holds the schemas, ``tests/openai_spec.py``
checks the objects against them). Errors are :mod:`hermes_trio.listener.errors`'
``ErrorBody``.

TypedDicts are plain dicts at run time: building one costs what building
the dict costs. What a model server sends back is read field by field
(:mod:`.chat_chunks`), not through these types.
"""

from __future__ import annotations

from typing import Literal, NotRequired, TypedDict

from .messages import ChatToolCall

__all__ = [
    "ChatChunkChoice",
    "ChatChunkDelta",
    "ChatChunkFunction",
    "ChatChunkToolCall",
    "ChatCompletion",
    "ChatCompletionChoice",
    "ChatCompletionChunk",
    "ChatCompletionMessage",
    "ChatModel",
    "ChatUsage",
]


class ChatUsage(TypedDict):
    """Chat Completions' ``usage`` object (``CompletionUsage``)."""

    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    prompt_tokens_details: dict[Literal["cached_tokens"], int]
    completion_tokens_details: dict[Literal["reasoning_tokens"], int]


class ChatChunkFunction(TypedDict, total=False):
    """A fragment of a streamed tool call's function: the name comes in
    the call's first fragment, the arguments' text in pieces."""

    name: str
    arguments: str


class ChatChunkToolCall(TypedDict):
    """``ChatCompletionMessageToolCallChunk``: only ``index`` is required."""

    index: int
    id: NotRequired[str]
    type: NotRequired[Literal["function"]]
    function: NotRequired[ChatChunkFunction]


class ChatChunkDelta(TypedDict, total=False):
    """``ChatCompletionStreamResponseDelta``; ``reasoning_content`` is the
    field reasoning servers (and this one) add."""

    role: Literal["assistant"]
    content: str | None
    reasoning_content: str
    tool_calls: list[ChatChunkToolCall]


class ChatChunkChoice(TypedDict):
    index: int
    delta: ChatChunkDelta
    logprobs: None
    finish_reason: str | None


class ChatCompletionChunk(TypedDict):
    """One ``chat.completion.chunk``; ``usage`` is there (null but on the
    last one) when the client asked for ``stream_options.include_usage``."""

    id: str
    object: Literal["chat.completion.chunk"]
    created: int
    model: str
    choices: list[ChatChunkChoice]
    usage: NotRequired[ChatUsage | None]


class ChatCompletionMessage(TypedDict):
    """``ChatCompletionResponseMessage`` as this server answers it."""

    role: Literal["assistant"]
    content: str | None
    refusal: None
    tool_calls: NotRequired[list[ChatToolCall]]
    reasoning_content: NotRequired[str]


class ChatCompletionChoice(TypedDict):
    index: int
    message: ChatCompletionMessage
    logprobs: None
    finish_reason: str


class ChatCompletion(TypedDict):
    """A non-streaming ``chat.completion`` (``CreateChatCompletionResponse``)."""

    id: str
    object: Literal["chat.completion"]
    created: int
    model: str
    choices: list[ChatCompletionChoice]
    usage: ChatUsage


class ChatModel(TypedDict):
    """OpenAI's ``Model`` object, one entry of ``GET /v1/models``."""

    id: str
    object: Literal["model"]
    created: int
    owned_by: str
