"""The platform registry: one entry per configured platform, its switch,
its adapter and what it tells a user."""

from __future__ import annotations

import dataclasses

import httpx
import pytest

from hermes_trio.config import (
    Config,
    DiscordConfig,
    HomeAssistantConfig,
    PlatformsConfig,
    SlackConfig,
    TelegramConfig,
    WhatsAppConfig,
)
from hermes_trio.gateway import build_adapters, startup_problem
from hermes_trio.gateway.access import allow_hint, configured_allow_list
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
    assert edit_interval_override(Config(), "discord") == 1.2
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
