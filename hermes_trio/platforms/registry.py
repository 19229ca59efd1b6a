"""Every chat platform the gateway can run, one entry each.

An entry says where the platform's settings are (its section of
``config.platforms``, reached through a typed accessor), whether they
enable it, how to build its adapter, and what to tell a user about it (the
setting that allows users, the one that turns it on). The gateway asks the
entries and never spells a platform's name.

A new platform is its adapter module (or its package, like ``telegram/``)
beside this file, its settings dataclass in ``PlatformsConfig``, and one
entry in ``PLATFORMS``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

import httpx

from ..config import (
    DEFAULT_EDIT_INTERVAL,
    Config,
    DiscordConfig,
    HomeAssistantConfig,
    PlatformsConfig,
    SlackConfig,
    TelegramConfig,
    WhatsAppConfig,
)
from .base import PlatformAdapter

__all__ = [
    "DISCORD",
    "HOMEASSISTANT",
    "PLATFORMS",
    "SLACK",
    "TELEGRAM",
    "WHATSAPP",
    "Platform",
    "PlatformSettings",
    "edit_interval_for",
    "edit_interval_override",
    "enabled_platforms",
    "find_platform",
]


class PlatformSettings(Protocol):
    """What every platform's section of ``config.platforms`` has."""

    @property
    def allowed_users(self) -> Sequence[int | str]: ...


S = TypeVar("S", bound=PlatformSettings)


def _no_edit_interval(settings: object) -> None:
    return None


def _inherits_nothing(settings: S, config: Config) -> S:
    return settings


@dataclass(frozen=True)
class Platform(Generic[S]):
    """One chat platform: its settings, its switch, its adapter, its hints."""

    name: str
    """The adapter's ``name``, and the section's key in ``config.platforms``."""
    section: Callable[[PlatformsConfig], S]
    switch: Callable[[S], bool]
    """Whether these settings turn the platform on."""
    make_adapter: Callable[[S, httpx.AsyncClient, bool], PlatformAdapter]
    """``(settings, client, filter_users)`` → the adapter; raises
    ``PlatformError`` (one line) when a setting it needs is missing."""
    allow_hint: str
    """Where the owner allows users, for refusals and startup warnings."""
    to_enable: tuple[str, str]
    """``(verb, setting)`` that turns it on, for the "nothing to run" line."""
    edit_interval_of: Callable[[S], float | None] = _no_edit_interval
    """The platform's own ``streaming.edit_interval``, if it has one."""
    default_edit_interval: float | None = None
    """The platform's built-in interval, used only when the user set none
    (neither the platform's own nor ``streaming.edit_interval``)."""
    inherit: Callable[[S, Config], S] = _inherits_nothing
    """The section with what it leaves to the rest of the config filled in
    (``transport: null`` → ``streaming.transport``), for the adapter."""

    def settings(self, config: Config) -> S:
        return self.section(config.platforms)

    def enabled(self, config: Config) -> bool:
        return self.switch(self.settings(config))

    def allowed_users(self, config: Config) -> list[int | str]:
        return list(self.settings(config).allowed_users)

    def edit_interval(self, config: Config) -> float | None:
        return self.edit_interval_of(self.settings(config))

    def build(
        self, config: Config, client: httpx.AsyncClient, *, filter_users: bool = True
    ) -> PlatformAdapter:
        """The adapter, sharing ``client`` (owned by the caller)."""
        return self.make_adapter(self.inherit(self.settings(config), config), client, filter_users)


def _on_with_credentials(enabled: bool | None, *credentials: str | None) -> bool:
    """A platform its credentials turn on; ``enabled`` overrides either way."""
    return all(credentials) if enabled is None else enabled


# Each adapter's module is imported when its platform is built: a gateway
# loads the platforms it runs (Discord's websocket client, Home Assistant's
# webhook server), not all of them.


def _telegram(settings: TelegramConfig, client: httpx.AsyncClient, only: bool) -> PlatformAdapter:
    # Imported here: only a gateway that runs Telegram loads its adapter.
    from .telegram import TelegramAdapter

    return TelegramAdapter(settings, client, filter_users=only)


def _discord(settings: DiscordConfig, client: httpx.AsyncClient, only: bool) -> PlatformAdapter:
    # Imported here: only a gateway that runs Discord loads its adapter.
    from .discord import DiscordAdapter

    return DiscordAdapter(settings, client, filter_users=only)


def _slack(settings: SlackConfig, client: httpx.AsyncClient, only: bool) -> PlatformAdapter:
    # Imported here: only a gateway that runs Slack loads its adapter.
    from .slack import SlackAdapter

    return SlackAdapter(settings, client, filter_users=only)


def _whatsapp(settings: WhatsAppConfig, client: httpx.AsyncClient, only: bool) -> PlatformAdapter:
    # Imported here: only a gateway that runs WhatsApp loads its adapter.
    from .whatsapp import WhatsAppAdapter

    return WhatsAppAdapter(settings, client, filter_users=only)


# -- Telegram, Discord, Slack: credentials turn them on -----------------------

TELEGRAM = Platform[TelegramConfig](
    name="telegram",
    section=lambda platforms: platforms.telegram,
    switch=lambda settings: _on_with_credentials(settings.enabled, settings.token),
    make_adapter=_telegram,
    allow_hint="platforms.telegram.allowed_users in config.yaml (or TELEGRAM_ALLOWED_USERS)",
    to_enable=("set", "TELEGRAM_BOT_TOKEN (or platforms.telegram.token)"),
    edit_interval_of=lambda settings: settings.edit_interval,
    inherit=lambda settings, config: dataclasses.replace(
        settings, transport=settings.transport or config.streaming.transport
    ),
)

DISCORD = Platform[DiscordConfig](
    name="discord",
    section=lambda platforms: platforms.discord,
    switch=lambda settings: _on_with_credentials(settings.enabled, settings.token),
    make_adapter=_discord,
    allow_hint="platforms.discord.allowed_users in config.yaml (or DISCORD_ALLOWED_USERS)",
    to_enable=("set", "DISCORD_BOT_TOKEN (or platforms.discord.token)"),
    edit_interval_of=lambda settings: settings.edit_interval,
    default_edit_interval=1.2,
)

SLACK = Platform[SlackConfig](
    name="slack",
    section=lambda platforms: platforms.slack,
    switch=lambda settings: _on_with_credentials(
        settings.enabled, settings.bot_token, settings.app_token
    ),
    make_adapter=_slack,
    allow_hint="platforms.slack.allowed_users in config.yaml (or SLACK_ALLOWED_USERS)",
    to_enable=("set", "SLACK_BOT_TOKEN and SLACK_APP_TOKEN (or platforms.slack)"),
    edit_interval_of=lambda settings: settings.edit_interval,
)


# -- WhatsApp: its switch turns it on -----------------------------------------

WHATSAPP = Platform[WhatsAppConfig](
    name="whatsapp",
    section=lambda platforms: platforms.whatsapp,
    switch=lambda settings: settings.enabled,
    make_adapter=_whatsapp,
    allow_hint="platforms.whatsapp.allowed_users in config.yaml",
    to_enable=("enable", "platforms.whatsapp"),
)


# -- Home Assistant -------------------------------------------------------------


def _homeassistant(
    settings: HomeAssistantConfig, client: httpx.AsyncClient, filter_users: bool
) -> PlatformAdapter:
    # Imported here: only a gateway that runs Home Assistant loads its
    # adapter (and the web server its webhook needs).
    from .homeassistant import HomeAssistantAdapter

    return HomeAssistantAdapter(
        settings,
        client,
        webhook_host=settings.webhook_host,
        webhook_port=settings.webhook_port,
        webhook_secret=settings.webhook_secret,
        reply_event=settings.reply_event,
        notify_service=settings.notify_service,
        filter_users=filter_users,
    )


HOMEASSISTANT = Platform[HomeAssistantConfig](
    name="homeassistant",
    section=lambda platforms: platforms.homeassistant,
    switch=lambda settings: settings.enabled,
    make_adapter=_homeassistant,
    allow_hint="platforms.homeassistant.allowed_users in config.yaml",
    to_enable=("enable", "platforms.homeassistant"),
)


PLATFORMS: tuple[Platform[Any], ...] = (TELEGRAM, DISCORD, SLACK, WHATSAPP, HOMEASSISTANT)
"""Every platform, in the order the gateway starts them."""

_BY_NAME = {platform.name: platform for platform in PLATFORMS}


def find_platform(name: str) -> Platform[Any] | None:
    """The entry of the platform ``name``; None for an adapter of its own
    (one an embedder hands the gateway)."""
    return _BY_NAME.get(name)


def enabled_platforms(config: Config) -> list[Platform[Any]]:
    """The platforms ``config`` turns on, in start order."""
    return [platform for platform in PLATFORMS if platform.enabled(config)]


def edit_interval_override(config: Config, name: str) -> float | None:
    """The platform ``name``'s own streaming edit interval, if it sets one."""
    platform = find_platform(name)
    return platform.edit_interval(config) if platform is not None else None


def edit_interval_for(config: Config, name: str) -> float:
    """Seconds between edits on the platform ``name``: its own setting, else
    the explicit ``streaming.edit_interval``, else its built-in default, else
    ``DEFAULT_EDIT_INTERVAL``. A built-in default never beats what the user set."""
    platform = find_platform(name)
    for interval in (
        edit_interval_override(config, name),
        config.streaming.edit_interval,
        platform.default_edit_interval if platform is not None else None,
    ):
        if interval is not None:
            return interval
    return DEFAULT_EDIT_INTERVAL
