"""The sans-IO wire layer: SSE framing, upstream stream accumulation and the
think-block filter. Pure functions and small state machines — no trio, no
httpx, no clock: the lowest layer ("Layers" in docs/architecture.md).
"""

from hermes_trio.wire.chat_chunks import (
    AssistantMessage,
    ChatChunkAccumulator,
    ChunkDelta,
    ToolCall,
    ToolCallArgs,
    ToolCallStart,
    message_from_completion,
)
from hermes_trio.wire.responses_stream import (
    ResponsesStreamAccumulator,
    chat_messages_to_responses_input,
    chat_tools_to_responses_tools,
    message_from_response,
)
from hermes_trio.wire.sse import SSEComment, SSEDecoder, SSEEvent, encode_comment, encode_event
from hermes_trio.wire.think import DEFAULT_THINK_TAGS, Filtered, ThinkFilter, strip_think_blocks
from hermes_trio.wire.upstream_fields import ChunkError, ProviderError

__all__ = [
    "DEFAULT_THINK_TAGS",
    "AssistantMessage",
    "ChatChunkAccumulator",
    "ChunkDelta",
    "ChunkError",
    "Filtered",
    "ProviderError",
    "ResponsesStreamAccumulator",
    "SSEComment",
    "SSEDecoder",
    "SSEEvent",
    "ThinkFilter",
    "ToolCall",
    "ToolCallArgs",
    "ToolCallStart",
    "chat_messages_to_responses_input",
    "chat_tools_to_responses_tools",
    "encode_comment",
    "encode_event",
    "message_from_completion",
    "message_from_response",
    "strip_think_blocks",
]
