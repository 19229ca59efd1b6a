"""The platform registry: one entry per configured platform, its switch,
its adapter and what it tells a user."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import httpx
import pytest
import trio
from support import agent_on_double

from hermes_trio.agent import Agent
from hermes_trio.config import (
    Config,
    DiscordConfig,
    HomeAssistantConfig,
    PlatformsConfig,
    SlackConfig,
    TelegramConfig,
    WhatsAppConfig,
    load_config,
)
from hermes_trio.consumers.messenger import Messenger
from hermes_trio.gateway import build_adapters, startup_problem
from hermes_trio.gateway.access import allow_hint, configured_allow_list
from hermes_trio.gateway.sessions import ChatSessions
from hermes_trio.platforms.base import PlatformError
from hermes_trio.platforms.registry import (
    PLATFORMS,
    TELEGRAM,
    edit_interval_override,
    enabled_platforms,
    find_platform,
)

# Enough settings for every adapter to be built (no platform is contacted).
READY = PlatformsConfig(
    telegram=TelegramConfig(token="1:abc", allowed_users=[7], edit_interval=0.5),
    discord=DiscordConfig(token="discord-token", allowed_users=["80351110224678912"]),
    slack=SlackConfig(bot_token="xoxb-1", app_token="xapp-1", allowed_users=["U0123"]),
    whatsapp=WhatsAppConfig(
        enabled=True,
        access_token="wa-token",
        phone_number_id="123",
        app_secret="wa-secret",
        allowed_users=["15550001"],
    ),
    homeassistant=HomeAssistantConfig(enabled=True, token="ha-token", allowed_users=["ha-user"]),
)


def with_platforms(platforms: PlatformsConfig) -> Config:
    return Config(platforms=platforms)


def test_every_configured_platform_has_exactly_one_entry() -> None:
    sections = dataclasses.fields(PlatformsConfig)
    names = [platform.name for platform in PLATFORMS]
    assert sorted(names) == sorted(field.name for field in sections)
    assert len(set(names)) == len(names)
    defaults = PlatformsConfig()
    for field in sections:
        entry = find_platform(field.name)
        assert entry is not None
        # The typed accessor reaches the section of the same name.
        assert entry.section(defaults) is getattr(defaults, field.name)
        assert entry.section(READY) is getattr(READY, field.name)


def test_nothing_is_enabled_by_default() -> None:
    assert enabled_platforms(Config()) == []
    assert find_platform("matrix") is None


@pytest.mark.parametrize(
    ("telegram", "on"),
    [
        (TelegramConfig(), False),
        (TelegramConfig(token="1:abc"), True),  # a token alone turns it on
        (TelegramConfig(token="1:abc", enabled=False), False),
        (TelegramConfig(enabled=True), True),  # on, and then it names the missing token
    ],
)
def test_telegram_is_enabled_by_its_token_unless_told(telegram: TelegramConfig, on: bool) -> None:
    config = with_platforms(PlatformsConfig(telegram=telegram))
    assert TELEGRAM.enabled(config) is on
    assert (enabled_platforms(config) == [TELEGRAM]) is on


def test_webhook_platforms_are_enabled_only_by_their_switch() -> None:
    credentials_only = PlatformsConfig(
        whatsapp=WhatsAppConfig(access_token="t", phone_number_id="1", app_secret="s"),
        homeassistant=HomeAssistantConfig(token="t"),
    )
    assert enabled_platforms(with_platforms(credentials_only)) == []
    names = [platform.name for platform in enabled_platforms(with_platforms(READY))]
    assert names == ["telegram", "discord", "slack", "whatsapp", "homeassistant"]


async def test_each_entry_builds_its_own_adapter() -> None:
    config = with_platforms(READY)
    async with httpx.AsyncClient() as client:
        adapters = build_adapters(config, client)
        assert [adapter.name for adapter in adapters] == [p.name for p in PLATFORMS]
        for platform in PLATFORMS:
            assert platform.build(config, client).name == platform.name


async def test_an_enabled_platform_without_its_credentials_names_the_setting() -> None:
    config = with_platforms(PlatformsConfig(telegram=TelegramConfig(enabled=True)))
    async with httpx.AsyncClient() as client:
        with pytest.raises(PlatformError, match="TELEGRAM_BOT_TOKEN"):
            build_adapters(config, client)


def test_allow_lists_and_hints_come_from_the_entries() -> None:
    config = with_platforms(READY)
    assert configured_allow_list(config, "telegram") == [7]
    assert configured_allow_list(config, "whatsapp") == ["15550001"]
    assert configured_allow_list(config, "homeassistant") == ["ha-user"]
    assert configured_allow_list(config, "my-own-adapter") == []
    for platform in PLATFORMS:
        assert f"platforms.{platform.name}.allowed_users" in allow_hint(platform.name)
    assert "TELEGRAM_ALLOWED_USERS" in allow_hint("telegram")
    assert allow_hint("my-own-adapter") == "the my-own-adapter allow-list"


def test_platforms_set_their_own_edit_interval() -> None:
    config = with_platforms(READY)
    assert edit_interval_override(config, "telegram") == 0.5
    assert edit_interval_override(Config(), "telegram") is None
    # Discord's 1.2 s is a built-in default, not a setting of the user's.
    assert edit_interval_override(Config(), "discord") is None
    assert edit_interval_override(Config(), "slack") is None
    assert edit_interval_override(config, "whatsapp") is None
    assert edit_interval_override(config, "my-own-adapter") is None


def test_nothing_to_run_names_every_platform_switch() -> None:
    config = Config().replace(model=dataclasses.replace(Config().model, base_url="http://m/v1"))
    assert startup_problem(config) == (
        "nothing to run: set TELEGRAM_BOT_TOKEN (or platforms.telegram.token) or "
        "DISCORD_BOT_TOKEN (or platforms.discord.token) or SLACK_BOT_TOKEN and "
        "SLACK_APP_TOKEN (or platforms.slack), enable "
        "platforms.whatsapp or platforms.homeassistant, or enable the API server "
        "(api_server.enabled / API_SERVER_ENABLED=1)"
    )


def _chat_sessions(config: Config, agent: Agent, nursery: trio.Nursery) -> ChatSessions:
    def no_messenger(platform: str, chat: str, thread: str | None) -> Messenger:
        raise AssertionError("nothing is sent here")

    return ChatSessions(config, agent, nursery, no_messenger, lambda: None)


@pytest.mark.parametrize(
    ("yaml_text", "expected"),
    [
        # Nothing set: each platform's built-in default.
        ("", {"telegram": 1.5, "discord": 1.2, "slack": 1.5, "whatsapp": 1.5}),
        # An explicit streaming.edit_interval reaches every editing platform,
        # Discord included ...
        (
            "streaming:\n  edit_interval: 3\n",
            {"telegram": 3.0, "discord": 3.0, "slack": 3.0, "my-own-adapter": 3.0},
        ),
        # ... unless the platform has its own.
        (
            "streaming:\n  edit_interval: 3\n"
            "platforms:\n  discord:\n    edit_interval: 0.8\n"
            "  telegram:\n    edit_interval: 2.5\n",
            {"telegram": 2.5, "discord": 0.8, "slack": 3.0},
        ),
    ],
)
async def test_the_edit_interval_of_each_platform_the_gateway_uses(
    tmp_path: Path, yaml_text: str, expected: dict[str, float]
) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(yaml_text)
    config = load_config(path, env={})
    async with agent_on_double() as (agent, _), trio.open_nursery() as nursery:
        sessions = _chat_sessions(config, agent, nursery)
        got = {name: sessions.editor_settings(name, stream=True).edit_interval for name in expected}
    assert got == expected
