"""config.yaml plus environment overrides, into one typed, validated object.

Every section is a dataclass; the loader walks the dataclass fields, so a key
that is not a field, a wrong type or a bad value fails with one line that
names the key and what it expects (``ConfigError``).

Precedence for a setting: ``HERMES_*``/``API_SERVER_*``/platform environment
variables, then ``config.yaml``, then the conventional ``OPENAI_*`` variables,
then the defaults below.

The same variables are also read from ``.env`` files: ``./.env`` (the
working directory) and ``<store.data_dir>/.env``. A real environment
variable wins over both, and the working directory's file over the data
directory's (which cannot move the data directory or the config file
itself). Nothing is exported into ``os.environ``. ``HERMES_DOTENV=0`` in the
environment reads neither.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import os
import re
import types
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints

import yaml

from .approvals.book import DEFAULT_APPROVAL_TIMEOUT
from .dotenv_files import DOTENV_NAME, EnvFileError, read_env_file
from .redaction import register_secret, register_url
from .url_allowlist import UrlRefused, parse_prefix
from .wire.think import DEFAULT_THINK_TAGS, is_tag_name

__all__ = [
    "DEFAULT_EDIT_INTERVAL",
    "DEFAULT_MCP_RESULT_BYTES",
    "AgentConfig",
    "ApiKeyConfig",
    "ApiServerConfig",
    "ApprovalTimeoutsConfig",
    "ApprovalsConfig",
    "CompactionConfig",
    "Config",
    "ConfigError",
    "DiscordConfig",
    "DisplayConfig",
    "FallbackModel",
    "GatewayConfig",
    "HomeAssistantConfig",
    "McpServerConfig",
    "ModelConfig",
    "PlatformsConfig",
    "SlackConfig",
    "StoreConfig",
    "StreamingConfig",
    "StreamingTransport",
    "TelegramConfig",
    "TimeoutsConfig",
    "UserId",
    "WhatsAppConfig",
    "check_keys",
    "config_from_sections",
    "load_config",
    "load_keys_file",
]

TRUE_WORDS = frozenset({"1", "true", "yes", "on"})
FALSE_WORDS = frozenset({"0", "false", "no", "off", ""})
# More worker processes than this is a typo, not a machine.
MAX_WORKERS = 64
# Seconds between two edits of one chat message when nothing says otherwise.
DEFAULT_EDIT_INTERVAL = 1.5

StreamingTransport = Literal["auto", "draft", "edit"]
"""How a chat platform shows an answer as it grows: ``draft``, the
platform's native draft (Telegram's ``sendMessageDraft``) where it has one;
``edit``, one message edited; ``auto``, drafts where the platform and the
chat allow them (Telegram private chats), edits elsewhere."""


class ConfigError(ValueError):
    """A bad configuration value; ``str()`` is the one line shown to the user."""


class UserId(str):
    """A platform's user id, kept as text. YAML reads an unquoted id
    (Discord's and Slack's are long numbers or words) as a number or a
    string; both mean the same user."""


def _secret() -> Any:
    """A field that holds a secret: no repr shows it, and it joins the
    redaction registry when its section is built."""
    return field(default=None, repr=False, metadata={"holds": "secret"})


def _url(default: str | None = None) -> Any:
    """A field that holds a URL: the credentials in it (user information, a
    key in its query) join the redaction registry when its section is built."""
    return field(default=default, metadata={"holds": "url"})


class _HoldsSecrets:
    """A section with fields declared :func:`_secret` or :func:`_url`. Their
    secrets join the redaction registry as the section is built, so every
    secret the process holds is registered however its config was made (a
    file, the environment, ``dataclasses.replace``, a library user's code)."""

    def __post_init__(self) -> None:
        for spec in dataclasses.fields(self):  # type: ignore[arg-type]
            holds = spec.metadata.get("holds")
            if holds is None:
                continue
            value = getattr(self, spec.name)
            if not isinstance(value, str):
                continue
            if holds == "secret":
                register_secret(value)
            elif holds == "url":
                register_url(value)


@dataclass(frozen=True)
class TimeoutsConfig:
    connect: float = 10.0
    """Seconds to open a connection to the model server."""
    first_token: float = 120.0
    """Seconds from sending a request to the first token of the answer (text,
    reasoning or a tool call; a role-only or empty chunk is not one)."""
    idle: float = 60.0
    """Longest silence in seconds between two tokens of a streamed answer,
    from the first token on."""
    request: float = 600.0
    """Seconds a whole non-streaming request may take."""
    total: float = 1800.0
    """Seconds a whole streamed answer may take, from the request to its
    end, however steadily it streams."""


@dataclass(frozen=True)
class FallbackModel(_HoldsSecrets):
    name: str = ""
    base_url: str | None = _url()
    api_key: str | None = _secret()
    api_mode: Literal["chat_completions", "responses"] | None = None


@dataclass(frozen=True)
class ModelConfig(_HoldsSecrets):
    base_url: str | None = _url()
    api_key: str | None = _secret()
    api_key_env: str | None = None
    name: str | None = None
    """None: the first model the server lists at ``GET /models``."""
    api_mode: Literal["chat_completions", "responses"] = "chat_completions"
    include_usage: bool = True
    max_retries: int = 3
    backoff_base: float = 0.5
    backoff_max: float = 20.0
    timeouts: TimeoutsConfig = field(default_factory=TimeoutsConfig)
    fallbacks: list[FallbackModel] = field(default_factory=list)
    extra_body: dict[str, Any] = field(default_factory=dict)
    vision: bool = True
    """The model takes images (``image_url`` content parts). False: an image
    sent on a chat platform gets a reply saying the model cannot see it."""
    max_answer_bytes: int = 64 * 1024 * 1024
    """Most bytes one answer of the model server may have, streamed (the
    whole event stream) or not (after decompression); beyond it the answer
    ends with an error naming this setting."""
    context_window: int | None = None
    """The model's context window in tokens. None: ask the model server
    (its model card, llama.cpp's ``/props``, Ollama's ``/api/show``), else
    ``compaction.default_window``."""


@dataclass(frozen=True)
class CompactionConfig:
    """How a conversation is kept inside the model's context window."""

    enabled: bool = True
    threshold: float = 0.75
    """Compact before a model request that would pass this share of the
    window (the rest is room for the reply)."""
    keep_recent: int = 4000
    """Tokens of the newest messages kept as they are (whole messages; at
    most a third of the window)."""
    summary_timeout: float = 120.0
    """Seconds the summary request may take before the oldest exchanges are
    dropped instead."""
    summary_max_tokens: int = 1024
    """The longest summary the model may write (its ``max_tokens``)."""
    default_window: int = 32768
    """The window assumed when neither ``model.context_window`` nor the model
    server says (logged once)."""


@dataclass(frozen=True)
class AgentConfig:
    system_prompt: str = (
        "You are Hermes, a helpful assistant. Answer concisely. Use the tools you are "
        "given when they help; say what you did."
    )
    max_iterations: int = 20
    tools: list[str] | None = None
    yolo: bool = False
    long_tool_hint: float = 10.0
    think_tags: list[str] = field(default_factory=lambda: list(DEFAULT_THINK_TAGS))
    workdir: str | None = None
    file_access: Literal["workdir", "anywhere"] = "workdir"
    """Where read_file and write_file may go: ``workdir`` keeps them inside
    ``workdir`` and ``file_roots`` (after resolving symlinks and ``..``);
    ``anywhere`` lets them use any path the process can.  The terminal tool
    is not confined either way."""
    file_roots: list[str] = field(default_factory=list)
    """More directories read_file and write_file may use under ``file_access:
    workdir`` (``~`` expanded, relative ones taken from ``workdir``)."""
    channel_size: int = 64
    approval_timeout: float | None = None
    """The old name of ``approvals.timeout``, used when that is not set."""


@dataclass(frozen=True)
class ApprovalTimeoutsConfig:
    """Per-surface ``approvals.timeout`` overrides, in seconds (None: the
    common one)."""

    cli: float | None = None
    api_server: float | None = None
    telegram: float | None = None
    discord: float | None = None
    slack: float | None = None
    whatsapp: float | None = None
    homeassistant: float | None = None


@dataclass(frozen=True)
class ApprovalsConfig:
    timeout: float | None = None
    """Seconds a tool call waits for a person's approval before it is
    denied as expired (default 300; ``agent.approval_timeout`` is its old
    name)."""
    approvers: list[UserId] = field(default_factory=list)
    """Who may answer any approval besides the person who asked (user ids
    on the chat platforms, API key names on the API server). On the chat
    platforms an entry ``telegram:123`` counts on that platform only."""
    per_platform: ApprovalTimeoutsConfig = field(default_factory=ApprovalTimeoutsConfig)


@dataclass(frozen=True)
class StreamingConfig:
    enabled: bool = False
    cli: bool | None = None
    api_server: bool | None = None
    telegram: bool | None = None
    discord: bool | None = None
    slack: bool | None = None
    whatsapp: bool | None = None
    homeassistant: bool | None = None
    edit_interval: float | None = None
    """Seconds between two edits of one message on every chat platform
    without its own ``platforms.<name>.edit_interval``. None: each
    platform's built-in default (Discord 1.2), else ``DEFAULT_EDIT_INTERVAL``."""
    min_tokens: int = 20
    cursor: str = " ▌"
    transport: StreamingTransport = "auto"
    """Drafts or edits on the chat platforms without their own
    ``platforms.<name>.transport`` (see ``StreamingTransport``)."""

    def enabled_for(self, consumer: str, request_stream: bool | None = None) -> bool:
        """Whether ``consumer`` streams: the request's own choice, then the
        per-consumer override, then the master switch."""
        if request_stream is not None:
            return request_stream
        override = getattr(self, consumer, None) if consumer in _CONSUMERS else None
        if override is not None:
            return bool(override)
        return self.enabled


_CONSUMERS = frozenset(
    {"cli", "api_server", "telegram", "discord", "slack", "whatsapp", "homeassistant"}
)


@dataclass(frozen=True)
class ApiKeyConfig(_HoldsSecrets):
    """One named API key and its limits (None: no limit of that kind)."""

    name: str = ""
    key: str | None = _secret()
    max_concurrent: int | None = None
    """Turns and relays of this key at once, each until it ends (a
    background response too, however long after its reply)."""
    requests_per_minute: int | None = None
    tokens_per_minute: int | None = None
    """Completion tokens over the last minute, charged as each turn or relay
    ends: as the model server reported them, else counted (about one per
    chunk) for an answer cut off or sent without its usage."""


@dataclass(frozen=True)
class ApiServerConfig(_HoldsSecrets):
    enabled: bool = False
    host: str = "127.0.0.1"
    port: int = 8642
    key: str | None = _secret()
    keys: list[ApiKeyConfig] = field(default_factory=list)
    """Named keys with limits, besides (or instead of) ``key``."""
    keys_file: str | None = None
    """A YAML file listing more named keys (reloaded on SIGHUP)."""
    cors_origins: list[str] = field(default_factory=list)
    """Web origins (``scheme://host[:port]``, ``*`` for any) whose pages may
    call the server besides its own; beyond these, browser requests get 403."""
    allowed_hosts: list[str] = field(default_factory=list)
    """Host names requests may be addressed to besides loopback ones
    (``name``, ``name:port``, ``.domain`` for it and its subdomains, ``*``
    for any). Empty: without a key loopback names only, with a key any."""
    mcp_allowed_urls: list[str] = field(default_factory=list)
    """URLs under which a request's ``mcp`` tool may name its ``server_url``:
    the same scheme, host and port, a path under the entry's at a ``/``
    (:mod:`hermes_trio.url_allowlist`; empty: none, so no request makes the
    server reach anywhere)."""
    model_name: str = "hermes-agent"
    allow_model_override: bool = False
    upstream_models: bool = False
    """List the model server's own models in ``/v1/models`` too, and pass a
    chat request naming one of them straight through (no agent)."""
    metrics_public: bool = False
    """``GET /metrics`` without the API key (for a scraper on a private network)."""
    max_concurrent: int | Literal["auto"] = "auto"
    """Turns running at once, per process (each ``serve --workers`` worker
    has its own); ``auto`` (the default): as many as the process keeps up
    with (a limit following its event loop's lag, at most
    ``max_connections``)."""
    workers: int = 1
    """Processes ``hermes-trio serve`` runs, sharing one listening socket
    and the store, under a supervisor that restarts one that dies."""
    max_body_bytes: int = 10 * 1024 * 1024
    keepalive_interval: float = 10.0
    write_timeout: float = 10.0
    session_ttl: float = 3600.0
    extra_params: Literal["pass", "drop", "reject"] = "pass"
    """Request fields the server does not use itself (``min_p``, ``top_k``, a
    newer OpenAI field): passed to the model server as they are, dropped, or
    refused with a 400 naming them."""
    session_max_bytes: int = 1024 * 1024
    """Most conversation one ``X-Session-ID`` session keeps (as JSON); the
    oldest whole turns are dropped beyond it, the newest is always kept."""
    max_sessions: int = 1000
    """Most ``X-Session-ID`` sessions kept at once; beyond it the least
    recently used one is dropped."""
    max_connections: int = 256
    """Client connections open at once; beyond, a connection gets 503 and is closed."""
    max_connections_per_client: int | None = None
    """Client connections one client address may hold open; beyond, a
    connection gets 429 and is closed. Unset: half of ``max_connections``."""
    header_timeout: float = 10.0
    """Seconds a client has to send a request's headers (a new connection:
    from its accept); then 408 and the connection is closed."""
    body_timeout: float = 30.0
    """Seconds a request body may go without a byte arriving (a stalled
    upload); then 408 and the connection is closed. A slow but steady upload
    is not cut off by it."""
    body_total_timeout: float = 600.0
    """Seconds a client has to send a whole request body, however steadily;
    then 408 and the connection is closed."""
    idle_timeout: float = 30.0
    """Seconds a kept-alive connection may sit idle between requests."""


@dataclass(frozen=True)
class StoreConfig(_HoldsSecrets):
    data_dir: str = "~/.hermes-trio"
    url: str | None = _url()
    """``postgresql://…``: keep all state in that PostgreSQL database instead
    of a SQLite file in ``data_dir`` (several instances share it)."""
    max_rows: int = 10_000
    max_age_days: float = 30.0


@dataclass(frozen=True)
class DisplayConfig:
    show_reasoning: bool = False
    show_tools: bool = True
    show_compaction: bool = True
    """A line in chats and the terminal when the conversation was compacted
    to fit the model's context window."""


@dataclass(frozen=True)
class RecordConfig:
    dir: str | None = None
    """Write one replayable file per turn here (``--record DIR``); None: off."""
    max_file_bytes: int = 8 * 1024 * 1024
    """Largest one recording may grow; a longer turn's file says it was cut."""
    max_total_bytes: int = 256 * 1024 * 1024
    """Past this many bytes of recordings in ``dir``, the oldest are deleted."""


@dataclass(frozen=True)
class TelegramConfig(_HoldsSecrets):
    enabled: bool | None = None
    token: str | None = _secret()
    api_base_url: str = _url("https://api.telegram.org")
    allowed_users: list[int] = field(default_factory=list)
    edit_interval: float | None = None
    poll_timeout: int = 30
    transport: StreamingTransport | None = None
    """Overrides ``streaming.transport`` here. None: follow it."""


@dataclass(frozen=True)
class WhatsAppConfig(_HoldsSecrets):
    enabled: bool = False
    access_token: str | None = _secret()
    phone_number_id: str | None = None
    app_secret: str | None = _secret()
    verify_token: str | None = _secret()
    api_base_url: str = _url("https://graph.facebook.com/v21.0")
    webhook_host: str = "127.0.0.1"
    webhook_port: int = 8643
    allowed_users: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class HomeAssistantConfig(_HoldsSecrets):
    enabled: bool = False
    url: str = _url("http://127.0.0.1:8123")
    token: str | None = _secret()
    allowed_users: list[str] = field(default_factory=list)
    webhook_host: str = "127.0.0.1"
    webhook_port: int = 8644
    webhook_secret: str | None = _secret()
    reply_event: str = "hermes_reply"
    notify_service: str | None = None


@dataclass(frozen=True)
class DiscordConfig(_HoldsSecrets):
    enabled: bool | None = None
    """None: on when a bot token is set."""
    token: str | None = _secret()
    api_base_url: str = _url("https://discord.com/api/v10")
    allowed_users: list[UserId] = field(default_factory=list)
    edit_interval: float | None = None
    """Seconds between two edits of one message here. None: the explicit
    ``streaming.edit_interval``, else Discord's own default (1.2)."""
    mention_only: bool = True
    """In server channels answer only messages that mention the bot (direct
    messages are always answered)."""


@dataclass(frozen=True)
class SlackConfig(_HoldsSecrets):
    enabled: bool | None = None
    """None: on when both tokens are set."""
    bot_token: str | None = _secret()
    """The bot token (``xoxb-…``) for the Web API."""
    app_token: str | None = _secret()
    """The app-level token (``xapp-…``) that opens Socket Mode connections."""
    api_base_url: str = _url("https://slack.com/api/")
    allowed_users: list[UserId] = field(default_factory=list)
    edit_interval: float | None = None
    mention_only: bool = True
    """In channels answer only messages that mention the bot (direct
    messages are always answered)."""
    transport: Literal["edit", "stream"] = "edit"
    """``edit``: one message edited as the answer grows (``chat.update``);
    ``stream``: Slack's streaming methods for AI apps
    (``chat.startStream``/``appendStream``/``stopStream``), falling back to
    edits where the workspace does not offer them."""


@dataclass(frozen=True)
class PlatformsConfig:
    telegram: TelegramConfig = field(default_factory=TelegramConfig)
    discord: DiscordConfig = field(default_factory=DiscordConfig)
    slack: SlackConfig = field(default_factory=SlackConfig)
    whatsapp: WhatsAppConfig = field(default_factory=WhatsAppConfig)
    homeassistant: HomeAssistantConfig = field(default_factory=HomeAssistantConfig)


@dataclass(frozen=True)
class GatewayConfig:
    on_new_message: Literal["interrupt", "queue"] = "interrupt"
    restart_backoff_max: float = 60.0
    late_notice_after: float = 60.0
    """A message that reaches the gateway this many seconds after it was sent
    (the gateway or the platform was down) is answered after a "back online"
    notice; 0 turns the notice off."""
    long_turn_notice: float = 120.0
    """Seconds a turn may run before its chat is told it is still being
    worked on (once per turn); 0 turns the notice off."""


McpApproval = Literal["always", "never", "auto"]
"""When a configured MCP server's tool asks the user first: ``always``,
``never``, or ``auto`` (unless the server annotates it ``readOnlyHint``)."""


DEFAULT_MCP_RESULT_BYTES = 1024 * 1024
"""``max_result_bytes`` unless set: also the cap of a request's own servers."""


@dataclass(frozen=True)
class McpServerConfig:
    """One MCP server: a command (stdio) or a ``url`` (streamable HTTP)."""

    command: str | None = None
    args: list[str] = field(default_factory=list)
    # The child's whole environment, with PATH added: nothing else leaks in.
    env: dict[str, str] = field(default_factory=dict, repr=False)
    cwd: str | None = None
    url: str | None = _url()
    headers: dict[str, str] = field(default_factory=dict, repr=False)
    enabled: bool = True
    tools: list[str] | None = None
    exclude_tools: list[str] = field(default_factory=list)
    require_approval: McpApproval = "auto"
    timeout: float = 60.0
    """Seconds one call (and the start) may take."""
    max_result_bytes: int = DEFAULT_MCP_RESULT_BYTES
    """The most bytes one answer of the server (a tool's result) may take:
    past it the call is an error and the rest is not read."""

    def __post_init__(self) -> None:
        register_url(self.url)
        # Header and environment values are credentials more often than not.
        for value in (*self.headers.values(), *self.env.values()):
            if isinstance(value, str) and len(value) >= 8:
                register_secret(value)


@dataclass(frozen=True)
class Config:
    model: ModelConfig = field(default_factory=ModelConfig)
    agent: AgentConfig = field(default_factory=AgentConfig)
    compaction: CompactionConfig = field(default_factory=CompactionConfig)
    streaming: StreamingConfig = field(default_factory=StreamingConfig)
    api_server: ApiServerConfig = field(default_factory=ApiServerConfig)
    store: StoreConfig = field(default_factory=StoreConfig)
    display: DisplayConfig = field(default_factory=DisplayConfig)
    record: RecordConfig = field(default_factory=RecordConfig)
    gateway: GatewayConfig = field(default_factory=GatewayConfig)
    platforms: PlatformsConfig = field(default_factory=PlatformsConfig)
    approvals: ApprovalsConfig = field(default_factory=ApprovalsConfig)
    mcp_servers: dict[str, McpServerConfig] = field(default_factory=dict)
    source: str | None = None
    """Path of the config file this came from (None: defaults and environment)."""
    env_files: tuple[str, ...] = ()
    """The ``.env`` files read, the one that wins first."""

    def replace(self, **changes: Any) -> Config:
        return dataclasses.replace(self, **changes)

    def approval_timeout(self, surface: str | None = None) -> float:
        """Seconds an approval asked on ``surface`` (``cli``, ``api_server``,
        ``telegram``, …; None: none in particular) waits: the surface's
        override, then ``approvals.timeout``, then its old name
        ``agent.approval_timeout``, then 300."""
        if surface is not None and surface in _SURFACES:
            override = getattr(self.approvals.per_platform, surface)
            if override is not None:
                return float(override)
        for value in (self.approvals.timeout, self.agent.approval_timeout):
            if value is not None:
                return float(value)
        return DEFAULT_APPROVAL_TIMEOUT


_SURFACES = frozenset(f.name for f in dataclasses.fields(ApprovalTimeoutsConfig))


# Environment variables that override config.yaml, as dotted key paths.
ENV_OVERRIDES: dict[str, str] = {
    "HERMES_MODEL_BASE_URL": "model.base_url",
    "HERMES_MODEL_API_KEY": "model.api_key",
    "HERMES_MODEL": "model.name",
    "HERMES_API_MODE": "model.api_mode",
    "HERMES_STREAMING_ENABLED": "streaming.enabled",
    "HERMES_STREAMING_TRANSPORT": "streaming.transport",
    "HERMES_YOLO_MODE": "agent.yolo",
    "HERMES_APPROVAL_TIMEOUT": "approvals.timeout",
    "HERMES_APPROVERS": "approvals.approvers",
    "HERMES_FILE_ACCESS": "agent.file_access",
    "HERMES_FILE_ROOTS": "agent.file_roots",
    "HERMES_SYSTEM_PROMPT": "agent.system_prompt",
    "HERMES_DATA_DIR": "store.data_dir",
    "HERMES_CONTEXT_WINDOW": "model.context_window",
    "HERMES_STORE_URL": "store.url",
    "API_SERVER_ENABLED": "api_server.enabled",
    "API_SERVER_HOST": "api_server.host",
    "API_SERVER_PORT": "api_server.port",
    "API_SERVER_WORKERS": "api_server.workers",
    "API_SERVER_KEY": "api_server.key",
    "API_SERVER_CORS_ORIGINS": "api_server.cors_origins",
    "API_SERVER_ALLOWED_HOSTS": "api_server.allowed_hosts",
    "API_SERVER_MAX_CONNECTIONS": "api_server.max_connections",
    "API_SERVER_MAX_CONNECTIONS_PER_CLIENT": "api_server.max_connections_per_client",
    "API_SERVER_MODEL_NAME": "api_server.model_name",
    "API_SERVER_EXTRA_PARAMS": "api_server.extra_params",
    "TELEGRAM_BOT_TOKEN": "platforms.telegram.token",
    "TELEGRAM_API_BASE_URL": "platforms.telegram.api_base_url",
    "TELEGRAM_ALLOWED_USERS": "platforms.telegram.allowed_users",
    "DISCORD_BOT_TOKEN": "platforms.discord.token",
    "DISCORD_API_BASE_URL": "platforms.discord.api_base_url",
    "DISCORD_ALLOWED_USERS": "platforms.discord.allowed_users",
    "SLACK_BOT_TOKEN": "platforms.slack.bot_token",
    "SLACK_APP_TOKEN": "platforms.slack.app_token",
    "SLACK_API_BASE_URL": "platforms.slack.api_base_url",
    "SLACK_ALLOWED_USERS": "platforms.slack.allowed_users",
}

# Fields of Config that say where it came from: no file may set them.
_LOADER_FIELDS = frozenset({"source", "env_files"})

# A data directory's .env is found through these: it cannot set them.
_BEFORE_DATA_DIR = frozenset({"HERMES_DATA_DIR", "HERMES_CONFIG"})

# Conventional variables that fill a setting only when neither the config
# file nor a HERMES_ variable set it.
ENV_FALLBACKS: dict[str, str] = {
    "OPENAI_BASE_URL": "model.base_url",
    "OPENAI_API_KEY": "model.api_key",
}


def load_config(
    path: str | os.PathLike[str] | None = None,
    *,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
    dotenv: bool | None = None,
) -> Config:
    """Load and validate the configuration.

    ``path``: explicit file (must exist); else ``HERMES_CONFIG``; else
    ``./config.yaml`` when present; else defaults. ``overrides`` are dotted
    keys set last (command-line flags). ``dotenv``: also read the ``.env``
    files (see the module's docstring); None reads them when ``env`` is the
    process's own environment and it does not say ``HERMES_DOTENV=0``.
    """
    if dotenv is None:
        dotenv = env is None and os.environ.get("HERMES_DOTENV", "1") != "0"
    env = os.environ if env is None else env
    files = _EnvFiles(env, read=dotenv)
    file_path = _config_file(path, files.env)
    raw = _read_config_file(file_path)

    # The file must be valid on its own, even where the environment or a
    # flag overrides a value: a broken file is reported, not masked.
    _check(_build(Config, copy.deepcopy(raw), ""))

    files.read_data_dir(raw)
    env = files.env
    for var, key in ENV_FALLBACKS.items():
        if env.get(var) and _get_path(raw, key) is None:
            _set_path(raw, key, _EnvValue(var, env[var]))
    for var, key in ENV_OVERRIDES.items():
        if var in env and (env[var] != "" or var.endswith(("_ENABLED", "_MODE"))):
            _set_path(raw, key, _EnvValue(var, env[var]))
    for key, value in (overrides or {}).items():
        _set_path(raw, key, value)

    config = _build(Config, raw, "")
    config = _resolve_api_key(config, env)
    _check(config)
    return dataclasses.replace(
        config, source=str(file_path) if file_path else None, env_files=tuple(files.read)
    )


class _EnvFiles:
    """The environment as the loader sees it: the real one over the ``.env``
    files read so far (``read``, the one that wins first)."""

    def __init__(self, env: Mapping[str, str], *, read: bool) -> None:
        self._on = read
        self._layers: list[Mapping[str, str]] = [env]
        self.read: list[str] = []
        self._here = Path(DOTENV_NAME)
        self._add(self._here)

    @property
    def env(self) -> Mapping[str, str]:
        merged: dict[str, str] = {}
        for layer in reversed(self._layers):
            merged.update(layer)
        return merged

    def read_data_dir(self, raw: dict[str, Any]) -> None:
        """Add the data directory's ``.env``: the directory as the
        environment (and the working directory's file) or ``raw`` names it."""
        data_dir = self.env.get("HERMES_DATA_DIR") or _get_path(raw, "store.data_dir")
        if not isinstance(data_dir, str) or not data_dir:
            data_dir = StoreConfig.data_dir
        there = Path(data_dir).expanduser() / DOTENV_NAME
        if self._on and not _same_file(there, self._here):
            self._add(there, ignore=_BEFORE_DATA_DIR)

    def _add(self, path: Path, ignore: frozenset[str] = frozenset()) -> None:
        if not self._on:
            return
        try:
            values = read_env_file(path)
        except EnvFileError as exc:
            raise ConfigError(f".env file {exc}") from None
        if values is None:
            return
        self._layers.append({k: v for k, v in values.items() if k not in ignore})
        self.read.append(str(path.absolute()))


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.samefile(b)
    except OSError:
        return False


def _config_file(path: str | os.PathLike[str] | None, env: Mapping[str, str]) -> Path | None:
    explicit = path if path is not None else env.get("HERMES_CONFIG") or None
    if explicit is not None:
        file_path = Path(explicit).expanduser()
        if not file_path.is_file():
            raise ConfigError(f"config file {file_path}: not found")
        return file_path
    return Path("config.yaml") if Path("config.yaml").is_file() else None


def _read_config_file(file_path: Path | None) -> dict[str, Any]:
    if file_path is None:
        return {}
    try:
        loaded = yaml.safe_load(file_path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or "invalid YAML"
        raise ConfigError(f"config file {file_path}{where}: {problem}") from None
    if loaded is None:
        return {}
    if not isinstance(loaded, dict):
        raise ConfigError(f"config file {file_path}: expected a mapping of sections at top level")
    return loaded


def config_from_sections(sections: Mapping[str, Any]) -> Config:
    """A config from sections already read (``{"model": {...}, "agent":
    {...}}``, as config.yaml holds them; a recorded turn's settings),
    checked as :func:`load_config` checks a file: ``ConfigError`` names the
    key. No environment, no file."""
    config: Config = _build(Config, copy.deepcopy(dict(sections)), "")
    _check(config)
    return config


@dataclass(frozen=True)
class _EnvValue:
    """A string from the environment, parsed to the field's type on build."""

    var: str
    text: str


def _get_path(raw: dict[str, Any], dotted: str) -> Any:
    node: Any = raw
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def _set_path(raw: dict[str, Any], dotted: str, value: Any) -> None:
    parts = dotted.split(".")
    node = raw
    for part in parts[:-1]:
        child = node.get(part)
        if not isinstance(child, dict):
            child = {}
            node[part] = child
        node = child
    node[parts[-1]] = value


def _build(cls: type, data: Any, prefix: str) -> Any:
    where = prefix.rstrip(".") or "top level"
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: expected a mapping, got {_describe(data)}")
    hints = get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls) if f.name not in _LOADER_FIELDS}
    unknown = sorted(set(data) - names)
    if unknown:
        raise ConfigError(
            f"{prefix}{unknown[0]}: unknown key (known keys here: {', '.join(sorted(names))})"
        )
    secret = {f.name for f in dataclasses.fields(cls) if f.metadata.get("holds") == "secret"}
    values = {
        name: (_convert_secret if name in secret else _convert)(
            hints[name], data[name], f"{prefix}{name}"
        )
        for name in data
    }
    return cls(**values)


def _convert_secret(tp: Any, value: Any, key: str) -> Any:
    """:func:`_convert` for a field that holds a secret: a wrong value is
    named by its kind only, never quoted (it may be the key itself)."""
    try:
        return _convert(tp, value, key)
    except ConfigError:
        raise ConfigError(
            f"{key}: expected a string, got {_kind(value)} (the value is not shown)"
        ) from None


def _kind(value: Any) -> str:
    """What :func:`_describe` says of a value, without the value."""
    if isinstance(value, dict | list) or value is None:
        return _describe(value)
    return type(value).__name__


def _convert(tp: Any, value: Any, key: str) -> Any:
    if isinstance(value, _EnvValue):
        return _convert_env(tp, value, key)
    origin = get_origin(tp)
    args = get_args(tp)
    if origin in (Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        if len(inner) == 1:
            return _convert(inner[0], value, key)
        return _convert_either(inner, value, key)
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return _build(tp, value, key + ".")
    if origin is Literal:
        if value not in args:
            choices = " or ".join(repr(a) for a in args)
            raise ConfigError(f"{key}: expected {choices}, got {value!r}")
        return value
    if origin is list:
        if not isinstance(value, list):
            raise ConfigError(f"{key}: expected a list, got {_describe(value)}")
        return [_convert(args[0], item, f"{key}[{i}]") for i, item in enumerate(value)]
    if origin is dict or tp is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{key}: expected a mapping, got {_describe(value)}")
        if args and args[1] is not Any:
            return {str(k): _convert(args[1], v, f"{key}.{k}") for k, v in value.items()}
        return dict(value)
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{key}: expected true or false, got {_describe(value)}")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{key}: expected an integer, got {_describe(value)}")
        if value < 0:
            raise ConfigError(f"{key}: expected a non-negative integer, got {value}")
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError(f"{key}: expected a number, got {_describe(value)}")
        if value < 0:
            raise ConfigError(f"{key}: expected a non-negative number, got {value}")
        return float(value)
    if tp is UserId:
        if isinstance(value, bool) or not isinstance(value, int | str):
            raise ConfigError(f"{key}: expected a user id, got {_describe(value)}")
        return UserId(value)
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(f"{key}: expected a string, got {_describe(value)}")
        return value
    if tp is Any:
        return value
    raise ConfigError(f"{key}: unsupported setting type {tp}")  # pragma: no cover


def _convert_either(arms: list[Any], value: Any, key: str) -> Any:
    """``value`` as the first of ``arms`` that takes it (``int | Literal["auto"]``);
    else one error naming what each would have taken."""
    wanted = []
    for arm in arms:
        try:
            return _convert(arm, value, key)
        except ConfigError as exc:
            wanted.append(str(exc).removeprefix(f"{key}: expected ").rsplit(", got ", 1)[0])
    raise ConfigError(f"{key}: expected {' or '.join(wanted)}, got {_describe(value)}")


def _convert_env(tp: Any, value: _EnvValue, key: str) -> Any:
    text = value.text.strip()
    origin = get_origin(tp)
    args = get_args(tp)
    if origin in (Union, types.UnionType):
        tp = next(a for a in args if a is not type(None))
        origin, args = get_origin(tp), get_args(tp)
    label = f"{value.var} (sets {key})"
    if tp is bool:
        word = text.lower()
        if word in TRUE_WORDS:
            return True
        if word in FALSE_WORDS:
            return False
        raise ConfigError(f"{label}: expected true/false (1/0, yes/no), got {value.text!r}")
    if tp is int or tp is float:
        try:
            number = tp(text)
        except ValueError:
            kind = "an integer" if tp is int else "a number"
            raise ConfigError(f"{label}: expected {kind}, got {value.text!r}") from None
        if number < 0:
            raise ConfigError(f"{label}: expected a non-negative number, got {value.text!r}")
        return number
    if origin is list:
        items = [item.strip() for item in text.split(",") if item.strip()]
        return [
            _convert_env(args[0], _EnvValue(value.var, item), key) if args[0] is not str else item
            for item in items
        ]
    if origin is Literal:
        if text not in args:
            choices = " or ".join(repr(a) for a in args)
            raise ConfigError(f"{label}: expected {choices}, got {value.text!r}")
        return text
    if tp is UserId:
        return UserId(text)
    return text


def _describe(value: Any) -> str:
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if value is None:
        return "nothing (null)"
    return f"{type(value).__name__} {value!r}"


def _resolve_api_key(config: Config, env: Mapping[str, str]) -> Config:
    model = config.model
    if model.api_key is None and model.api_key_env:
        key = env.get(model.api_key_env)
        if not key:
            raise ConfigError(
                f"model.api_key_env: environment variable {model.api_key_env} is not set"
            )
        return dataclasses.replace(config, model=dataclasses.replace(model, api_key=key))
    return config


def _check(config: Config) -> None:
    """Cross-field and range checks the type walk cannot express."""
    for key, url in [("model.base_url", config.model.base_url)] + [
        (f"model.fallbacks[{i}].base_url", fb.base_url)
        for i, fb in enumerate(config.model.fallbacks)
    ]:
        if url is not None and not url.startswith(("http://", "https://")):
            raise ConfigError(f"{key}: expected an http:// or https:// URL, got {url!r}")
    for i, fb in enumerate(config.model.fallbacks):
        if not fb.name:
            raise ConfigError(f"model.fallbacks[{i}].name: expected a model name")
    store_url = config.store.url
    if store_url is not None and not store_url.startswith(("postgresql://", "postgres://")):
        raise ConfigError(
            "store.url: expected a postgresql:// URL (leave it unset for the SQLite file in "
            "store.data_dir)"
        )
    if config.agent.max_iterations < 1:
        raise ConfigError("agent.max_iterations: expected an integer of at least 1")
    for key in ("max_file_bytes", "max_total_bytes"):
        if getattr(config.record, key) < 1024:
            raise ConfigError(f"record.{key}: expected a number of bytes of at least 1024")
    if not 0 <= config.api_server.port < 65536:
        raise ConfigError(
            f"api_server.port: expected 0-65535 (0 picks a free port), got {config.api_server.port}"
        )
    if config.api_server.max_concurrent != "auto" and config.api_server.max_concurrent < 1:
        raise ConfigError("api_server.max_concurrent: expected an integer of at least 1 or 'auto'")
    if not 1 <= config.api_server.workers <= MAX_WORKERS:
        raise ConfigError(
            f"api_server.workers: expected an integer from 1 to {MAX_WORKERS}, "
            f"got {config.api_server.workers}"
        )
    if config.api_server.session_max_bytes < 1024:
        raise ConfigError("api_server.session_max_bytes: expected an integer of at least 1024")
    if config.api_server.max_sessions < 1:
        raise ConfigError("api_server.max_sessions: expected an integer of at least 1")
    _check_api_edge(config.api_server)
    check_keys(config.api_server.keys, "api_server.keys")
    _check_approvals(config)
    _check_mcp(config)
    if config.agent.channel_size < 1:
        raise ConfigError("agent.channel_size: expected an integer of at least 1")
    for i, tag in enumerate(config.agent.think_tags):
        # Checked here, not when the first turn builds its think filter.
        if not is_tag_name(tag):
            raise ConfigError(
                f"agent.think_tags[{i}]: expected a tag name (no spaces, '<', '>' or '/'), "
                f"got {json.dumps(tag)}"
            )
    for key in ("connect", "first_token", "idle", "request", "total"):
        if getattr(config.model.timeouts, key) <= 0:
            raise ConfigError(f"model.timeouts.{key}: expected a number of seconds above 0")
    if config.model.max_answer_bytes < 1024:
        raise ConfigError("model.max_answer_bytes: expected an integer of at least 1024")
    _check_compaction(config)


def _check_compaction(config: Config) -> None:
    window = config.model.context_window
    if window is not None and window < 256:
        raise ConfigError("model.context_window: expected a number of tokens of at least 256")
    c = config.compaction
    if not 0.1 <= c.threshold < 1:
        raise ConfigError(
            f"compaction.threshold: expected a share from 0.1 to 0.99, got {c.threshold}"
        )
    for key in ("keep_recent", "summary_max_tokens"):
        if getattr(c, key) < 1:
            raise ConfigError(f"compaction.{key}: expected a number of tokens of at least 1")
    if c.default_window < 256:
        raise ConfigError("compaction.default_window: expected a number of tokens of at least 256")
    if c.summary_timeout <= 0:
        raise ConfigError("compaction.summary_timeout: expected a number of seconds above 0")


_MCP_LABEL = re.compile(r"[A-Za-z0-9-]+(_[A-Za-z0-9-]+)*")


def _check_mcp(config: Config) -> None:
    for label, server in config.mcp_servers.items():
        key = f"mcp_servers.{label}"
        # The label is the first half of "<label>__<tool>": no "__" in it.
        if not _MCP_LABEL.fullmatch(label) or len(label) > 32:
            raise ConfigError(
                f"{key}: a label is letters, digits, '-' and single '_' (at most 32), got {label!r}"
            )
        if (server.command is None) == (server.url is None):
            raise ConfigError(f"{key}: expected either command (stdio) or url (streamable HTTP)")
        if server.url is not None and not server.url.startswith(("http://", "https://")):
            raise ConfigError(f"{key}.url: expected an http:// or https:// URL")
        if server.timeout <= 0:
            raise ConfigError(f"{key}.timeout: expected a number of seconds above 0")
        if server.max_result_bytes < 1024:
            raise ConfigError(f"{key}.max_result_bytes: expected an integer of at least 1024")
    for i, prefix in enumerate(config.api_server.mcp_allowed_urls):
        # Parsed as a request's server_url will be, so an entry means one
        # scheme, host and port (and a path), never a string prefix.
        try:
            parse_prefix(prefix)
        except UrlRefused as why:
            raise ConfigError(
                f"api_server.mcp_allowed_urls[{i}]: expected http(s)://host[:port][/path], "
                f"without user, query or fragment: {why}"
            ) from None


def _check_approvals(config: Config) -> None:
    timeouts = [
        ("agent.approval_timeout", config.agent.approval_timeout),
        ("approvals.timeout", config.approvals.timeout),
    ] + [
        (f"approvals.per_platform.{name}", getattr(config.approvals.per_platform, name))
        for name in sorted(_SURFACES)
    ]
    for key, value in timeouts:
        if value is not None and value <= 0:
            raise ConfigError(f"{key}: expected a number of seconds above 0")


_ORIGIN = re.compile(r"[a-z][a-z0-9+.-]*://[^/?#@\s]+/?", re.IGNORECASE)
_HOST = re.compile(
    r"(\.?[a-z0-9_-]+(\.[a-z0-9_-]+)*\.?|\[[0-9a-f:.]+\])(:[0-9]{1,5})?", re.IGNORECASE
)


def check_keys(keys: list[ApiKeyConfig], where: str) -> None:
    """Each named key has a name and a secret, both unique; limits are
    positive."""
    names: set[str] = set()
    secrets_seen: set[str] = set()
    for i, entry in enumerate(keys):
        at = f"{where}[{i}]"
        if not entry.name:
            raise ConfigError(f"{at}.name: expected a name (it is logged; the key never is)")
        if not entry.key:
            raise ConfigError(f"{at}.key: expected the key itself")
        if entry.name in names:
            raise ConfigError(f"{at}.name: {entry.name!r} names two keys")
        if entry.key in secrets_seen:
            raise ConfigError(f"{at}.key: the same key is listed twice")
        names.add(entry.name)
        secrets_seen.add(entry.key)
        for limit in ("max_concurrent", "requests_per_minute", "tokens_per_minute"):
            value = getattr(entry, limit)
            if value is not None and value < 1:
                raise ConfigError(f"{at}.{limit}: expected an integer of at least 1 (or none)")


def load_keys_file(path: str) -> list[ApiKeyConfig]:
    """The named keys of a keys file (a YAML list, or ``keys:`` and a list)."""
    where = f"api_server.keys_file {path}"
    try:
        raw = yaml.safe_load(Path(path).expanduser().read_text())
    except OSError as exc:
        raise ConfigError(f"{where}: cannot be read ({exc.strerror or exc})") from None
    except yaml.YAMLError as exc:
        # Where, never what: YAML's own message quotes the text around the
        # error, and in this file that text is a key.
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        raise ConfigError(
            f"{where}: not valid YAML{at} (its text is not shown: it holds keys)"
        ) from None
    if isinstance(raw, dict):
        raw = raw.get("keys")
    if not isinstance(raw, list):
        raise ConfigError(f"{where}: expected a list of keys (name, key, limits)")
    for i, entry in enumerate(raw):
        if not isinstance(entry, dict):
            # A bare key in the list is the likely mistake: never quote it.
            raise ConfigError(
                f"{where}: keys_file[{i}]: expected a mapping (name, key, limits), got "
                f"{_kind(entry)} (the value is not shown)"
            )
    try:
        keys = [_build(ApiKeyConfig, entry, f"keys_file[{i}].") for i, entry in enumerate(raw)]
        check_keys(keys, "keys_file")
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    return keys


def _check_api_edge(api: ApiServerConfig) -> None:
    """The settings of the server's HTTP edge: connections and the request gate."""
    if api.max_connections < 1:
        raise ConfigError("api_server.max_connections: expected an integer of at least 1")
    if api.max_connections_per_client is not None and api.max_connections_per_client < 1:
        raise ConfigError(
            "api_server.max_connections_per_client: expected an integer of at least 1 (or none)"
        )
    for key in ("header_timeout", "body_timeout", "body_total_timeout", "idle_timeout"):
        if getattr(api, key) <= 0:
            raise ConfigError(f"api_server.{key}: expected a number of seconds above 0")
    for i, origin in enumerate(api.cors_origins):
        if origin != "*" and not _ORIGIN.fullmatch(origin):
            raise ConfigError(
                f"api_server.cors_origins[{i}]: expected an origin like "
                f"'http://localhost:3000' (scheme://host[:port], no path) or '*', got {origin!r}"
            )
    for i, host in enumerate(api.allowed_hosts):
        if host != "*" and not _HOST.fullmatch(host):
            raise ConfigError(
                f"api_server.allowed_hosts[{i}]: expected a host name like 'hermes.lan', "
                f"'hermes.lan:8642', '.example.com' or '*', got {host!r}"
            )
