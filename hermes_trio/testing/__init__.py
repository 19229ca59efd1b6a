"""Test helpers: a scripted OpenAI-compatible model server.

Usage (inside a trio program or a pytest-trio test)::

    from hermes_trio.testing import TextReply, open_scripted_server

    async with open_scripted_server([TextReply("Hi there")]) as server:
        ...  # point your client at server.base_url
"""

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
from .scripted_model.model import Reply, ReplyFunction
from .scripted_model.records import ConnectionRecord, RecordedRequest
from .scripted_model.server import ScriptedModelServer, open_scripted_server

__all__ = [
    "ConnectionRecord",
    "Drop",
    "ErrorFrame",
    "ErrorReply",
    "JSONInsteadOfStream",
    "RawReply",
    "RecordedRequest",
    "RefuseStream",
    "Reply",
    "ReplyFunction",
    "ScriptedModelServer",
    "Stall",
    "Step",
    "TextReply",
    "ToolCallReply",
    "open_scripted_server",
    "split_tokens",
]
