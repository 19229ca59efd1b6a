"""``POST /v1/responses/compact``: a conversation made into one
``compaction`` item, as OpenAI's ``response.compaction`` object.

The conversation is the previous response's (``previous_response_id``)
followed by ``input``; the model summarises all of it in non-streamed
requests (:func:`hermes_trio.compaction.summarize`), and the summary goes
back sealed (:mod:`hermes_trio.wire.sealed`). Nothing is stored: the client
sends the output as the start of its next request's ``input`` (with
``store: false`` too), where the item becomes the summary again.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import trio

from ...agent import Agent
from ...compaction import summarize
from ...endings import ErrorCode
from ...events import Usage
from ...llm import ModelError
from ...store import wall_clock
from ...wire.context import estimate_tokens
from ...wire.messages import Message
from ...wire.responses_out import new_item_id, new_response_id, response_usage
from ...wire.responses_types import CompactionItem, ResponseUsage
from ...wire.sealed import Sealer, compaction_item
from ..parsing.errors import APIError, error_status
from ..parsing.validation import bad, optional_str, request_object
from .input import SealedInput, parse_input_items

__all__ = ["CompactRequest", "compact_conversation", "parse_compact_request"]

# What the spec's CompactResponseMethodPublicBody has besides these: prompt
# caching and the service tier, which change nothing here.
_IGNORED = frozenset(
    {"prompt_cache_key", "prompt_cache_retention", "prompt_cache_options", "service_tier"}
)
_READ = frozenset({"model", "input", "previous_response_id", "instructions"})


@dataclass
class CompactRequest:
    model: str | None
    previous_response_id: str | None
    instructions: str | None
    messages: list[Message]
    sealed: list[SealedInput]


def parse_compact_request(body: Any) -> CompactRequest:
    """Validate a ``POST /v1/responses/compact`` body; 400 naming the field."""
    body = request_object(body)
    unknown = sorted(set(body) - _READ - _IGNORED)
    if unknown:
        raise bad(f"unknown field '{unknown[0]}'", unknown[0])
    previous = optional_str(body, "previous_response_id")
    if previous is not None and not previous:
        raise bad("'previous_response_id' must not be empty", "previous_response_id")
    messages: list[Message] = []
    sealed: list[SealedInput] = []
    if body.get("input") is not None:
        messages, _, _, sealed = parse_input_items(body["input"])
    elif previous is None:
        raise bad("send 'input', 'previous_response_id', or both", "input")
    return CompactRequest(
        model=optional_str(body, "model"),
        previous_response_id=previous,
        instructions=optional_str(body, "instructions"),
        messages=messages,
        sealed=sealed,
    )


def _usage(folded: list[Message], summary: str) -> ResponseUsage:
    # The summary requests' own counts are the model server's; these are
    # the estimates the compaction works with.
    given = estimate_tokens(folded)
    written = math.ceil(len(summary) / 4)
    return response_usage(Usage(given, written, given + written))


async def compact_conversation(
    agent: Agent, sealer: Sealer, conversation: list[Message], model: str | None
) -> dict[str, Any]:
    """The ``response.compaction`` object of ``conversation``."""
    if not conversation:
        raise bad("there is nothing to compact: the conversation is empty", "input")
    cfg = agent.config.compaction
    window = await agent.context.window(model)
    text = ""
    with trio.move_on_after(cfg.summary_timeout) as scope:
        try:
            text = await summarize(
                agent.client,
                agent.config,
                conversation,
                window=window,
                ratio=agent.context.calibration.ratio,
                model=model,
            )
        except ModelError as exc:
            raise APIError(
                error_status(exc.code, exc.status),
                f"the model could not summarise the conversation: {exc.message}",
                code=exc.code or ErrorCode.MODEL_ERROR,
            ) from None
    if scope.cancelled_caught:
        raise APIError(
            504,
            f"the summary took longer than {cfg.summary_timeout:g} s (compaction.summary_timeout)",
            code=ErrorCode.MODEL_TIMEOUT,
        )
    item: CompactionItem = compaction_item(sealer, new_item_id("cmp"), text)
    return {
        "id": new_response_id(),
        "object": "response.compaction",
        "created_at": int(wall_clock()),
        "output": [item],
        "usage": _usage(conversation, text),
    }
