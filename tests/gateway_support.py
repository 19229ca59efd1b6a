"""Set-up shared by the in-process gateway tests on WhatsApp and Home
Assistant: the platform config pointed at the fake, and where the running
adapter listens."""

from __future__ import annotations

from hermes_trio.config import HomeAssistantConfig, PlatformsConfig, WhatsAppConfig
from hermes_trio.gateway import Gateway
from hermes_trio.testing import FakeHomeAssistant, FakeWhatsApp


def whatsapp_platforms(whatsapp: FakeWhatsApp, *allowed_users: str) -> PlatformsConfig:
    """WhatsApp alone, on the fake ``whatsapp``, its webhook on a free port."""
    return PlatformsConfig(
        whatsapp=WhatsAppConfig(
            enabled=True,
            access_token=whatsapp.access_token,
            phone_number_id=whatsapp.phone_number_id,
            app_secret=whatsapp.app_secret,
            verify_token=whatsapp.verify_token,
            api_base_url=whatsapp.base_url,
            webhook_port=0,
            allowed_users=list(allowed_users),
        )
    )


def homeassistant_platforms(ha: FakeHomeAssistant, *allowed_users: str) -> PlatformsConfig:
    """Home Assistant alone, on the fake ``ha``, its webhook on a free port."""
    return PlatformsConfig(
        homeassistant=HomeAssistantConfig(
            enabled=True,
            url=ha.base_url,
            token=ha.token,
            webhook_port=0,
            allowed_users=list(allowed_users),
        )
    )


def webhook(gateway: Gateway, name: str) -> str:
    """The URL the running ``name`` adapter takes its platform's webhooks on."""
    url = getattr(gateway.adapters[name], "webhook_url", None)
    assert isinstance(url, str)
    return url
