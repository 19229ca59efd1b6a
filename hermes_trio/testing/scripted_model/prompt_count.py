"""How many tokens the scripted model counts in a request's prompt: a
documented, deterministic count, so that a test can know in advance which
conversation fits a ``context_window`` and which is refused.

Each message counts :data:`MESSAGE_OVERHEAD` tokens plus the word-ish
pieces (:func:`hermes_trio.testing.split_tokens`) of its text: the content
(a string, or the ``text`` of each part), each tool call's name and
arguments, a tool result. An image part counts :data:`IMAGE_TOKENS`.
Nothing else counts: not the tool definitions, not ``max_tokens``.

Chat Completions: each of ``messages``. Responses: ``instructions`` (one
message), and each ``input`` item (a string ``input`` is one message): a
message's content (``input_text`` / ``output_text`` parts), a
``function_call``'s name and arguments, a ``function_call_output``'s output.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..script import split_tokens

__all__ = ["IMAGE_TOKENS", "MESSAGE_OVERHEAD", "prompt_tokens"]

#: Tokens each message costs besides its text (its role and framing).
MESSAGE_OVERHEAD = 4
#: Tokens an image part costs (OpenAI's low-detail price).
IMAGE_TOKENS = 85

_IMAGE_PARTS = frozenset({"image_url", "input_image"})


def _text_tokens(value: object) -> int:
    return len(split_tokens(value)) if isinstance(value, str) else 0


def _content_tokens(content: object) -> int:
    if isinstance(content, str):
        return _text_tokens(content)
    if not isinstance(content, list):
        return 0
    total = 0
    for part in content:
        if isinstance(part, Mapping):
            if part.get("type") in _IMAGE_PARTS:
                total += IMAGE_TOKENS
            else:
                total += _text_tokens(part.get("text"))
        elif isinstance(part, str):
            total += _text_tokens(part)
    return total


def _call_tokens(call: object) -> int:
    if not isinstance(call, Mapping):
        return 0
    function = call.get("function")
    if isinstance(function, Mapping):
        call = function
    return _text_tokens(call.get("name")) + _text_tokens(call.get("arguments"))


def _message_tokens(message: object) -> int:
    total = MESSAGE_OVERHEAD
    if not isinstance(message, Mapping):
        return total
    total += _content_tokens(message.get("content"))
    calls = message.get("tool_calls")
    if isinstance(calls, list):
        total += sum(_call_tokens(call) for call in calls)
    return total


def _item_tokens(item: object) -> int:
    if not isinstance(item, Mapping):
        return MESSAGE_OVERHEAD + _content_tokens(item)
    kind = item.get("type")
    if kind == "function_call":
        return MESSAGE_OVERHEAD + _call_tokens(item)
    if kind == "function_call_output":
        return MESSAGE_OVERHEAD + _content_tokens(item.get("output"))
    return _message_tokens(item)


def prompt_tokens(body: Mapping[str, Any]) -> int:
    """The prompt tokens of a Chat Completions or Responses request body,
    as the scripted model counts them (see the module's description)."""
    messages = body.get("messages")
    if isinstance(messages, list):
        return sum(_message_tokens(message) for message in messages)
    total = 0
    if isinstance(body.get("instructions"), str):
        total += MESSAGE_OVERHEAD + _text_tokens(body["instructions"])
    items = body.get("input")
    if isinstance(items, str):
        total += MESSAGE_OVERHEAD + _text_tokens(items)
    elif isinstance(items, list):
        total += sum(_item_tokens(item) for item in items)
    return total
