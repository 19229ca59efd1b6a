"""Test helpers: a scripted OpenAI-compatible model server.

Usage (inside a trio program or a pytest-trio test)::

    from hermes_trio.testing import TextReply, open_scripted_server

    async with open_scripted_server([TextReply("Hi there")]) as server:
        ...  # point your client at server.base_url
"""

from .model_server import (
    ConnectionRecord,
    RecordedRequest,
    ScriptedModelServer,
    open_scripted_server,
)
from .script import (
    Drop,
    ErrorFrame,
    ErrorReply,
    JSONInsteadOfStream,
    RawReply,
    RefuseStream,
    Stall,
    Step,
    TextReply,
    ToolCallReply,
    split_tokens,
)

__all__ = [
    "ConnectionRecord",
    "Drop",
    "ErrorFrame",
    "ErrorReply",
    "JSONInsteadOfStream",
    "RawReply",
    "RecordedRequest",
    "RefuseStream",
    "ScriptedModelServer",
    "Stall",
    "Step",
    "TextReply",
    "ToolCallReply",
    "open_scripted_server",
    "split_tokens",
]
