"""The Chat Completions TypedDicts (hermes_trio/wire/chat_types.py and the
error body in listener/errors.py) name the fields OpenAI's spec gives the
same objects: none the spec lacks (but the documented ``reasoning_content``
extension) and every one it requires."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from hermes_trio.listener.errors import ErrorBody, ErrorObject
from hermes_trio.wire.chat_types import (
    ChatChunkDelta,
    ChatChunkToolCall,
    ChatCompletion,
    ChatCompletionChunk,
    ChatCompletionMessage,
    ChatModel,
    ChatUsage,
)

_SCHEMAS = json.loads((Path(__file__).parent / "openai_schemas.json").read_text(encoding="utf-8"))[
    "schemas"
]
# Fields this server adds to OpenAI's objects, as reasoning servers do.
_EXTENSIONS = {"reasoning_content"}


def _keys(typed: Any) -> set[str]:
    return set(typed.__annotations__)


@pytest.mark.parametrize(
    ("typed", "schema"),
    [
        (ChatCompletion, "CreateChatCompletionResponse"),
        (ChatCompletionChunk, "CreateChatCompletionStreamResponse"),
        (ChatCompletionMessage, "ChatCompletionResponseMessage"),
        (ChatChunkDelta, "ChatCompletionStreamResponseDelta"),
        (ChatChunkToolCall, "ChatCompletionMessageToolCallChunk"),
        (ChatUsage, "CompletionUsage"),
        (ChatModel, "Model"),
        (ErrorObject, "Error"),
        (ErrorBody, "ErrorResponse"),
    ],
)
def test_a_typed_dict_names_the_fields_of_its_schema(typed: Any, schema: str) -> None:
    spec = _SCHEMAS[schema]
    keys = _keys(typed)
    assert keys - _EXTENSIONS <= set(spec["properties"])
    assert set(spec.get("required", ())) <= keys
