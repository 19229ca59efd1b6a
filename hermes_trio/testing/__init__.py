"""A testing kit: a scripted OpenAI-compatible model (as an in-process httpx
transport or as a real server on a loopback port), an in-memory chat for the
message editor, and fake chat platform APIs. See ``README.md`` beside this
file.

In-process, on trio's ``MockClock`` (no socket, no thread)::

    from hermes_trio import open_agent
    from hermes_trio.testing import ModelDouble, TextReply

    model = ModelDouble([TextReply("Hi there", delay=2.0)])
    async with open_agent(config, transport=model) as agent:
        ...

A real server, for clients you cannot hand a transport::

    async with open_scripted_server([TextReply("Hi there")]) as server:
        ...  # point your client at server.base_url

Names resolve on first use, like the root package's: ``hermes-trio
replay`` and ``--demo`` load the scripted model without the fake platforms
(and their adapters), and a ``serve`` that uses neither loads none of it.
"""

from __future__ import annotations

import sys
from importlib import import_module
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .fake_discord import (
        DiscordCall,
        DiscordMessage,
        FakeDiscord,
        GatewayConnection,
        GatewayOp,
        open_fake_discord,
    )
    from .fake_homeassistant import (
        FakeHomeAssistant,
        HAEvent,
        HAServiceCall,
        open_fake_homeassistant,
    )
    from .fake_http import FakeTransport
    from .fake_messenger import FakeCall, FakeMessenger
    from .fake_slack import FakeSlack, SlackCall, SlackMessage, open_fake_slack
    from .fake_telegram import (
        FakeDraft,
        FakeMessage,
        FakeTelegram,
        TelegramCall,
        open_fake_telegram,
    )
    from .fake_whatsapp import FakeWhatsApp, WhatsAppCall, WhatsAppSent, open_fake_whatsapp
    from .replay import Replay, TimedEvent, recorded_tools, replay, replay_turn
    from .replay_data import Recording
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
    from .scripted_model.double import ModelDouble
    from .scripted_model.model import Reply, ReplyFunction
    from .scripted_model.prompt_count import prompt_tokens
    from .scripted_model.records import ConnectionRecord, RecordedRequest
    from .scripted_model.server import ScriptedModelServer, open_scripted_server

__all__ = [
    "ConnectionRecord",
    "DiscordCall",
    "DiscordMessage",
    "Drop",
    "ErrorFrame",
    "ErrorReply",
    "FakeCall",
    "FakeDiscord",
    "FakeDraft",
    "FakeHomeAssistant",
    "FakeMessage",
    "FakeMessenger",
    "FakeSlack",
    "FakeTelegram",
    "FakeTransport",
    "FakeWhatsApp",
    "GatewayConnection",
    "GatewayOp",
    "HAEvent",
    "HAServiceCall",
    "JSONInsteadOfStream",
    "ModelDouble",
    "RawReply",
    "RecordedRequest",
    "Recording",
    "RefuseStream",
    "Replay",
    "Reply",
    "ReplyFunction",
    "ScriptedModelServer",
    "SlackCall",
    "SlackMessage",
    "Stall",
    "Step",
    "TelegramCall",
    "TextReply",
    "TimedEvent",
    "ToolCallReply",
    "WhatsAppCall",
    "WhatsAppSent",
    "open_fake_discord",
    "open_fake_homeassistant",
    "open_fake_slack",
    "open_fake_telegram",
    "open_fake_whatsapp",
    "open_scripted_server",
    "prompt_tokens",
    "recorded_tools",
    "replay",
    "replay_turn",
    "split_tokens",
]

# Where each public name lives.
_HOMES = {
    "ConnectionRecord": ".scripted_model.records",
    "DiscordCall": ".fake_discord",
    "DiscordMessage": ".fake_discord",
    "Drop": ".script",
    "ErrorFrame": ".script",
    "ErrorReply": ".script",
    "FakeCall": ".fake_messenger",
    "FakeDiscord": ".fake_discord",
    "FakeDraft": ".fake_telegram",
    "FakeHomeAssistant": ".fake_homeassistant",
    "FakeMessage": ".fake_telegram",
    "FakeMessenger": ".fake_messenger",
    "FakeSlack": ".fake_slack",
    "FakeTelegram": ".fake_telegram",
    "FakeTransport": ".fake_http",
    "FakeWhatsApp": ".fake_whatsapp",
    "GatewayConnection": ".fake_discord",
    "GatewayOp": ".fake_discord",
    "HAEvent": ".fake_homeassistant",
    "HAServiceCall": ".fake_homeassistant",
    "JSONInsteadOfStream": ".script",
    "ModelDouble": ".scripted_model.double",
    "RawReply": ".script",
    "RecordedRequest": ".scripted_model.records",
    "Recording": ".replay_data",
    "RefuseStream": ".script",
    "Replay": ".replay",
    "Reply": ".scripted_model.model",
    "ReplyFunction": ".scripted_model.model",
    "ScriptedModelServer": ".scripted_model.server",
    "SlackCall": ".fake_slack",
    "SlackMessage": ".fake_slack",
    "Stall": ".script",
    "Step": ".script",
    "TelegramCall": ".fake_telegram",
    "TextReply": ".script",
    "TimedEvent": ".replay",
    "ToolCallReply": ".script",
    "WhatsAppCall": ".fake_whatsapp",
    "WhatsAppSent": ".fake_whatsapp",
    "open_fake_discord": ".fake_discord",
    "open_fake_homeassistant": ".fake_homeassistant",
    "open_fake_slack": ".fake_slack",
    "open_fake_telegram": ".fake_telegram",
    "open_fake_whatsapp": ".fake_whatsapp",
    "open_scripted_server": ".scripted_model.server",
    "prompt_tokens": ".scripted_model.prompt_count",
    "recorded_tools": ".replay",
    "replay": ".replay",
    "replay_turn": ".replay",
    "split_tokens": ".script",
}

if not TYPE_CHECKING:
    # Hidden from type checkers: they see the imports above.
    def __getattr__(name: str) -> Any:
        home = _HOMES.get(name)
        if home is None:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        value = getattr(import_module(home, __name__), name)
        globals()[name] = value
        return value


class _Kit(ModuleType):
    """The package, where the function ``replay`` keeps its name although
    its module is called ``replay`` too: importlib binds a submodule on its
    package once loaded (``from hermes_trio.testing.replay import …``),
    which would hide the function behind the module."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "replay" and isinstance(value, ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Kit


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
