"""``hermes-trio gateway`` as a command: startup checks, and a real
subprocess against the fake Telegram and the scripted model server."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
import trio
from support import clean_env, gateway_process, make_config

from hermes_trio.cli.gateway import _main, run_gateway
from hermes_trio.config import Config, PlatformsConfig, TelegramConfig, load_config
from hermes_trio.gateway import build_adapters
from hermes_trio.gateway.sessions import _command
from hermes_trio.platforms.registry import TELEGRAM
from hermes_trio.platforms.telegram.adapter import TelegramAdapter
from hermes_trio.testing import TextReply, open_scripted_server
from hermes_trio.testing.fake_telegram import open_fake_telegram

TOKEN = "555777:CLI-secret_token_do_not_log"
ANSWER = "The gateway answered from a subprocess and finished cleanly."


def test_refuses_to_start_without_a_model_server(capsys: pytest.CaptureFixture[str]) -> None:
    config = Config(platforms=PlatformsConfig(telegram=TelegramConfig(token=TOKEN)))
    assert run_gateway(config) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "model.base_url" in err and "HERMES_MODEL_BASE_URL" in err and "OPENAI_BASE_URL" in err


def test_refuses_to_start_with_nothing_to_run(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_gateway(make_config("http://127.0.0.1:9/v1")) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "TELEGRAM_BOT_TOKEN" in err and "platforms.telegram.token" in err


def test_enabled_telegram_without_token_names_the_setting(
    capsys: pytest.CaptureFixture[str],
) -> None:
    config = make_config(
        "http://127.0.0.1:9/v1", platforms=PlatformsConfig(telegram=TelegramConfig(enabled=True))
    )
    assert run_gateway(config) == 2
    assert "TELEGRAM_BOT_TOKEN" in capsys.readouterr().err


def test_cli_exit_code_and_message(tmp_path: Path) -> None:
    # A subprocess: main() configures logging for the whole process.
    done = subprocess.run(
        [sys.executable, "-m", "hermes_trio.cli", "gateway"],
        env=clean_env(HERMES_MODEL_BASE_URL="http://127.0.0.1:9/v1"),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 2
    assert done.stderr.startswith("hermes-trio gateway: nothing to run")
    assert done.stdout == ""


async def test_token_alone_enables_telegram() -> None:
    env = {"TELEGRAM_BOT_TOKEN": TOKEN, "HERMES_MODEL_BASE_URL": "http://127.0.0.1:9/v1"}
    config = load_config(env=env)
    assert TELEGRAM.enabled(config)
    async with httpx.AsyncClient() as client:
        (adapter,) = build_adapters(config, client)
        assert isinstance(adapter, TelegramAdapter)
        off = config.replace(
            platforms=PlatformsConfig(telegram=TelegramConfig(token=TOKEN, enabled=False))
        )
        assert build_adapters(off, client) == []
    assert TOKEN not in repr(config)


def test_commands_are_recognised() -> None:
    assert _command("/stop") == "/stop"
    assert _command("  /STOP@hermes_bot now") == "/stop"
    assert _command("stop") is None
    assert _command("") is None


async def test_subprocess_round_trip_and_clean_sigterm(tmp_path: Path) -> None:
    async with (
        open_scripted_server([TextReply(ANSWER, delay=0.01)]) as model,
        open_fake_telegram(TOKEN) as telegram,
    ):
        env = clean_env(
            TELEGRAM_BOT_TOKEN=TOKEN,
            TELEGRAM_API_BASE_URL=telegram.base_url,
            TELEGRAM_ALLOWED_USERS="7, 8",
            # Credentials in the URL must never be printed.
            HERMES_MODEL_BASE_URL=model.base_url.replace("://", "://someone:Pr0xyPassw0rd@"),
            HERMES_STREAMING_ENABLED="1",
            HERMES_DATA_DIR=str(tmp_path / "data"),
        )
        async with gateway_process(env, tmp_path) as (process, out, err):
            with trio.move_on_after(15) as waiting:
                await out.wait_for(b"running telegram")
            assert not waiting.cancelled_caught, f"no ready line; stderr: {err.text()}"
            telegram.push_message(chat_id=31, user_id=7, text="hello from a user")
            with trio.fail_after(10):
                await telegram.wait_until(lambda: telegram.texts(31) == [ANSWER])
            process.send_signal(signal.SIGTERM)
            with trio.fail_after(10):
                code = await process.wait()
        assert code == 0, err.text()
        (message,) = telegram.visible(31)
        assert message.history.count(ANSWER) == 1
        output = out.text() + err.text()
        assert "@hermes_test_bot" in output
        assert "SIGTERM received" in output
        assert TOKEN not in output
        assert "Pr0xyPassw0rd" not in output and "someone" not in output
        assert f"model server {model.base_url}" in output


async def test_exits_with_an_error_when_every_adapter_is_rejected(
    capsys: pytest.CaptureFixture[str],
) -> None:
    async with open_fake_telegram("1:other-token") as telegram:
        config = make_config(
            "http://127.0.0.1:9/v1",
            platforms=PlatformsConfig(
                telegram=TelegramConfig(token=TOKEN, api_base_url=telegram.base_url)
            ),
        )
        with trio.fail_after(5):
            assert await _main(config) == 1
    err = capsys.readouterr().err
    assert "every platform adapter failed" in err
    assert TOKEN not in err
