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
"""

from .fake_discord import (
    DiscordCall,
    DiscordMessage,
    FakeDiscord,
    GatewayConnection,
    GatewayOp,
    open_fake_discord,
)
from .fake_homeassistant import FakeHomeAssistant, HAEvent, HAServiceCall, open_fake_homeassistant
from .fake_http import FakeTransport
from .fake_messenger import FakeCall, FakeMessenger
from .fake_slack import FakeSlack, SlackCall, SlackMessage, open_fake_slack
from .fake_telegram import FakeDraft, FakeMessage, FakeTelegram, TelegramCall, open_fake_telegram
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
