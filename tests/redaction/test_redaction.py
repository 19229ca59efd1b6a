"""Secrets never leave the process: not in errors a client or chat user sees,
not in logs, even when the model server echoes the key it was sent."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
import trio
from support import api_stack, clean_env, http_for, make_config

from hermes_trio import redaction
from hermes_trio.config import (
    ApiServerConfig,
    Config,
    FallbackModel,
    HomeAssistantConfig,
    ModelConfig,
    PlatformsConfig,
    StreamingConfig,
    TelegramConfig,
    WhatsAppConfig,
)
from hermes_trio.gateway import open_gateway
from hermes_trio.llm import ModelError
from hermes_trio.server.run import open_api_server
from hermes_trio.testing import ErrorFrame, ErrorReply, open_scripted_server
from hermes_trio.testing.fake_telegram import open_fake_telegram

KEY = "sk-live-Zq9xY8wV7uT6sR5qP4oN3mL2kJ1iH0gF"
ECHO = f"Incorrect API key provided: {KEY}. You can find your API key in your dashboard."
# What OpenAI-style servers print instead of the whole key.
TRUNCATED = f"Incorrect API key provided: {KEY[:12]}…{KEY[-8:]}."


def leaks(text: str, key: str = KEY) -> bool:
    return key in text or key[:12] in text or key[-8:] in text


# -- the registry ------------------------------------------------------------


def test_a_registered_secret_is_replaced_wherever_it_appears() -> None:
    secret = "hk-registry-0123456789abcdef"
    redaction.register_secret(secret)
    cleaned = redaction.redact(f"a {secret} b {secret}")
    assert cleaned == f"a {redaction.REDACTED} b {redaction.REDACTED}"


def test_the_url_quoted_form_is_replaced_too() -> None:
    secret = "hk-quoted/0123456789+abcdef=="
    redaction.register_secret(secret)
    quoted = "hk-quoted%2F0123456789%2Babcdef%3D%3D"
    assert redaction.redact(f"GET /bot{quoted}/getMe") == f"GET /bot{redaction.REDACTED}/getMe"


def test_a_truncated_echo_of_a_long_secret_is_replaced() -> None:
    secret = "hk-trunc-a1B2c3D4e5F6g7H8i9J0"
    redaction.register_secret(secret)
    for echoed in (secret[:8], secret[:15], secret[-8:], secret[-12:]):
        cleaned = redaction.redact(f"key provided: {echoed}… (check it)")
        assert echoed not in cleaned, echoed
        assert cleaned.startswith("key provided: ") and cleaned.endswith("… (check it)")
    # Fewer than eight characters of it say nothing about the secret.
    assert redaction.redact(f"key: {secret[:7]}…") == f"key: {secret[:7]}…"


def test_short_secrets_never_redact_ordinary_text() -> None:
    for short in ("t", "x", "sekrit", "1234567"):
        redaction.register_secret(short)
    text = "the test said x = 1234567; sekrit stuff"
    assert redaction.redact(text) == text


def test_a_long_secret_does_not_redact_words_it_happens_to_start_with() -> None:
    secret = "correct horse battery staple"
    redaction.register_secret(secret)
    assert redaction.redact("the correct answer") == "the correct answer"
    assert redaction.redact(f"key={secret}") == f"key={redaction.REDACTED}"


def test_every_secret_of_a_config_joins_the_registry() -> None:
    secrets = {
        "model": "sk-model-0123456789abcdef",
        "fallback": "sk-fallback-0123456789abcdef",
        "api": "api-server-key-0123456789",
        "telegram": "111222:telegram-token-0123456789",
        "wa_token": "EAAG-whatsapp-0123456789",
        "wa_secret": "whatsapp-app-secret-0123456789",
        "wa_verify": "whatsapp-verify-0123456789",
        "ha_token": "ha-long-lived-token-0123456789",
        "ha_secret": "ha-webhook-secret-0123456789",
    }
    config = Config(
        model=ModelConfig(
            api_key=secrets["model"],
            fallbacks=[FallbackModel(name="fb", api_key=secrets["fallback"])],
        ),
        api_server=ApiServerConfig(key=secrets["api"]),
        platforms=PlatformsConfig(
            telegram=TelegramConfig(token=secrets["telegram"]),
            whatsapp=WhatsAppConfig(
                access_token=secrets["wa_token"],
                app_secret=secrets["wa_secret"],
                verify_token=secrets["wa_verify"],
            ),
            homeassistant=HomeAssistantConfig(
                token=secrets["ha_token"], webhook_secret=secrets["ha_secret"]
            ),
        ),
    )
    text = " ".join(secrets.values())
    assert redaction.redact(text) == " ".join([redaction.REDACTED] * len(secrets))
    assert not any(s in repr(config) for s in secrets.values())


def test_url_userinfo_and_key_parameters_of_url_fields_join_the_registry() -> None:
    ModelConfig(base_url="http://proxyuser:Pr0xy-Field-Passw0rd@proxy.test:3128/v1")
    FallbackModel(name="fb", base_url="https://fbuser:short1@fb.test/v1?api_key=Query-Key-0123456789")
    HomeAssistantConfig(url="http://hauser:Ha-Url-Passw0rd-42@ha.test:8123")
    for leaked in (
        "http://proxyuser:Pr0xy-Field-Passw0rd@proxy.test:3128/v1/chat/completions",
        "https://fbuser:short1@fb.test/v1/chat/completions?api_key=Query-Key-0123456789",
        "wrong password Pr0xy-Field-Passw0rd",
        "http://hauser:Ha-Url-Passw0rd-42@ha.test:8123/api/",
    ):
        cleaned = redaction.redact(leaked)
        for secret in ("Pr0xy-Field-Passw0rd", "fbuser:short1", "Query-Key-0123456789"):
            assert secret not in cleaned, cleaned
        assert "Ha-Url-Passw0rd-42" not in cleaned
    # Host, path and parameters that are no key stay readable.
    ModelConfig(base_url="https://example.test/openai/v1?api-version=2024-06-01")
    assert redaction.redact("api-version=2024-06-01") == "api-version=2024-06-01"


def test_a_url_is_shown_without_its_userinfo_and_query() -> None:
    assert (
        redaction.shown_url("http://u:p@[::1]:8080/v1?api_key=k#frag") == "http://[::1]:8080/v1"
    )
    assert redaction.shown_url("https://host.test/v1") == "https://host.test/v1"
    assert redaction.shown_url("not a url") == "not a url"


def test_config_secrets_are_declared_not_guessed_from_repr() -> None:
    import dataclasses

    from hermes_trio import config as config_module

    secret_words = ("key", "token", "secret", "password")
    for name in config_module.__all__:
        section = getattr(config_module, name)
        if not dataclasses.is_dataclass(section):
            continue
        for spec in dataclasses.fields(section):
            kinds = spec.metadata.get("holds")
            if spec.name.endswith(secret_words) and "str" in str(spec.type):
                assert kinds == "secret", f"{name}.{spec.name} is not declared a secret"
                assert not spec.repr, f"{name}.{spec.name} is shown by repr"
            if spec.name.endswith("url"):
                assert kinds == "url", f"{name}.{spec.name} is not declared a URL"


def test_model_errors_are_redacted_when_they_are_made() -> None:
    redaction.register_secret(KEY)
    assert not leaks(ModelError(ECHO).message)
    assert not leaks(str(ModelError(TRUNCATED)))


def test_log_records_of_every_logger_are_redacted(caplog: pytest.LogCaptureFixture) -> None:
    redaction.register_secret(KEY)
    caplog.set_level(logging.DEBUG)
    for name in ("hermes_trio.llm", "hermes_trio.deeper.module", "httpx", "httpcore", "hypercorn"):
        logging.getLogger(name).warning("upstream said %s", ECHO)
    try:
        raise ValueError(TRUNCATED)
    except ValueError:
        logging.getLogger("hermes_trio.server").exception("the turn crashed")
    assert "upstream said" in caplog.text and "the turn crashed" in caplog.text
    assert not leaks(caplog.text)
    assert not any(leaks(r.getMessage()) for r in caplog.records)


# -- end to end ---------------------------------------------------------------


CHAT = {"model": "hermes-agent", "messages": [{"role": "user", "content": "hi"}]}


async def test_an_echoed_model_key_reaches_no_api_client_and_no_log(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    script = [
        ErrorReply(401, ECHO),  # non-streamed
        ErrorReply(401, TRUNCATED),  # streamed, before the first byte
        ErrorFrame(text="partial", message=ECHO),  # streamed, after output started
        ErrorReply(401, ECHO),  # Responses API
    ]
    async with api_stack(script, model={"api_key": KEY, "max_retries": 0}) as (api, model):
        async with http_for(api) as http:
            plain = await http.post("/chat/completions", json=CHAT)
            streamed = await http.post("/chat/completions", json={**CHAT, "stream": True})
            mid = await http.post("/chat/completions", json={**CHAT, "stream": True})
            responses = await http.post(
                "/responses", json={"model": "hermes-agent", "input": "hi", "stream": True}
            )
        assert len(model.model_requests) == 4
        # The model server did get the key: it is only kept from everyone else.
        assert model.model_requests[0].headers["authorization"] == f"Bearer {KEY}"
    assert plain.status_code == 502 and "Incorrect API key" in plain.text
    assert streamed.status_code == 502 and "Incorrect API key" in streamed.text
    assert mid.status_code == 200 and "Incorrect API key" in mid.text
    assert "Incorrect API key" in responses.text
    for response in (plain, streamed, mid, responses):
        assert not leaks(response.text), response.text
    assert "Incorrect API key" in caplog.text
    assert not leaks(caplog.text)


async def test_an_echoed_model_key_never_reaches_the_terminal(tmp_path: Path) -> None:
    async with open_scripted_server([ErrorReply(401, ECHO)]) as model:
        env = clean_env(
            HERMES_MODEL_BASE_URL=model.base_url,
            HERMES_MODEL_API_KEY=KEY,
            HERMES_MODEL="scripted-model",
            HERMES_DATA_DIR=str(tmp_path),
        )
        with trio.fail_after(20):
            done = await trio.run_process(
                [sys.executable, "-m", "hermes_trio.cli", "-v", "chat", "-q", "hi"],
                env=env,
                cwd=str(tmp_path),
                capture_stdout=True,
                capture_stderr=True,
                check=False,
                stdin=subprocess.DEVNULL,
            )
    output = done.stdout.decode() + done.stderr.decode()
    assert done.returncode == 1, output
    assert "Incorrect API key" in output
    assert not leaks(output), output


async def test_an_echoed_model_key_never_reaches_a_chat_user() -> None:
    token = "777888:gateway-redaction-token-0123"
    async with (
        open_scripted_server([ErrorReply(401, ECHO)]) as model,
        open_fake_telegram(token) as telegram,
    ):
        config = make_config(
            model.base_url,
            model={"api_key": KEY, "max_retries": 0},
            streaming=StreamingConfig(enabled=True, edit_interval=0.05, min_tokens=2),
            platforms=PlatformsConfig(
                telegram=TelegramConfig(
                    token=token, api_base_url=telegram.base_url, allowed_users=[7], poll_timeout=5
                )
            ),
        )
        async with open_gateway(config) as gateway:
            telegram.push_message(42, 7, "hello")
            with trio.fail_after(5):
                await gateway.wait_until(
                    lambda: gateway.turns_done("telegram", 42) >= 1 and gateway.idle()
                )
        shown = "\n".join(telegram.texts(42))
    assert "Incorrect API key" in shown
    assert not leaks(shown), shown


async def test_a_password_in_the_model_url_reaches_no_api_client_and_no_log(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    password = "Pr0xyPassw0rdSecret"
    script = [ErrorReply(500, "boom"), ErrorReply(500, "boom")]
    async with open_scripted_server(script) as model:
        url = model.base_url.replace("http://", f"http://proxyuser:{password}@")
        config = make_config(url, model={"max_retries": 0}, api_server=ApiServerConfig())
        async with open_api_server(config, port=0) as api, http_for(api) as http:
            plain = await http.post("/chat/completions", json=CHAT)
            streamed = await http.post("/chat/completions", json={**CHAT, "stream": True})
    for answer in (plain, streamed):
        assert answer.status_code == 502, answer.text
        message = answer.json()["error"]["message"]
        assert "boom" in message and model.base_url in message
        assert password not in answer.text and "proxyuser" not in answer.text
    assert "HTTP Request: POST" in caplog.text
    assert password not in caplog.text and "proxyuser:" not in caplog.text


async def test_a_platform_error_echoing_part_of_its_token_is_redacted() -> None:
    from hermes_trio.consumers.messenger import PlatformError
    from hermes_trio.platforms.homeassistant.adapter import HomeAssistantAdapter
    from hermes_trio.testing.fake_homeassistant import open_fake_homeassistant

    token = "ha-echoed-long-lived-token-0123456789"
    async with open_fake_homeassistant(token) as fake, httpx.AsyncClient() as client:
        config = HomeAssistantConfig(url=fake.base_url, token=token)
        adapter = HomeAssistantAdapter(config, client, webhook_port=0)
        fake.fail_next(500, f"invalid token {token[:14]}…{token[-9:]}")
        with pytest.raises(PlatformError) as info:
            await adapter.check()
    assert "invalid token" in str(info.value)
    assert token[:14] not in str(info.value) and token[-9:] not in str(info.value)


def test_the_basic_form_of_url_credentials_is_a_secret_and_a_bare_user_name_is_not() -> None:
    import base64

    ModelConfig(base_url="http://basicuser:Basic-Passw0rd-77@basic.test/v1")
    basic = base64.b64encode(b"basicuser:Basic-Passw0rd-77").decode()
    for leaked in (f"Authorization: Basic {basic}", f"echoed {basic.rstrip('=')}"):
        assert basic.rstrip("=") not in redaction.redact(leaked)
    # A token as the user name is a secret; an ordinary user name is not.
    redaction.register_url("https://Tok3n-As-The-User-Name-0123@git.test/repo")
    assert "Tok3n-As-The-User-Name-0123" not in redaction.redact("Tok3n-As-The-User-Name-0123")
    redaction.register_url("postgresql://plainuser@db.test:5432/hermes")
    assert redaction.redact("postgresql://plainuser@db.test") == "postgresql://plainuser@db.test"
