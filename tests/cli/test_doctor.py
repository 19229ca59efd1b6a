"""``hermes-trio doctor`` against a healthy and a broken set-up (the real
command, the scripted model server, the fake Telegram)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from support import clean_env, run_cli

from hermes_trio.testing import TextReply, ToolCallReply, open_scripted_server
from hermes_trio.testing.fake_telegram import open_fake_telegram

TOKEN = "987654:DOCTOR-secret_token_value"


async def doctor(env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[bytes]:
    return await run_cli(["doctor"], env, cwd, within=60)


async def test_a_healthy_set_up_passes_every_check(tmp_path: Path) -> None:
    script = [TextReply("OK"), ToolCallReply([("get_time", {})])]
    async with (
        open_scripted_server(script, context_window=8192) as model,
        open_fake_telegram(TOKEN) as telegram,
    ):
        env = clean_env(
            HERMES_MODEL_BASE_URL=model.base_url,
            HERMES_DATA_DIR=str(tmp_path / "data"),
            TELEGRAM_BOT_TOKEN=TOKEN,
            TELEGRAM_API_BASE_URL=telegram.base_url,
            TELEGRAM_ALLOWED_USERS="7",
        )
        del env["HERMES_CONTEXT_WINDOW"]  # the model server says it
        result = await doctor(env, tmp_path)
        sent = telegram.texts(7)
    out = result.stdout.decode()
    assert result.returncode == 0, out + result.stderr.decode()
    lines = [line for line in out.splitlines() if not line.startswith("hermes-trio")]
    assert [line.split(":")[0] for line in lines] == [
        "ok    config",
        "ok    model server",
        "ok    streaming",
        "ok    tool calling",
        "ok    context window",
        "ok    store",
        "ok    api server",
        "ok    telegram",
    ]
    assert "lists 'scripted-model'" in lines[1]
    assert lines[4].endswith(": 8192 tokens, from the model card (max_model_len)")
    assert "@" in lines[-1] and TOKEN not in out
    assert "all checks passed" in result.stderr.decode() + out
    # Two tiny model requests; nothing sent to any chat.
    assert len(model.model_requests) == 2
    assert sent == []


async def test_a_broken_set_up_names_every_failure_and_exits_1(tmp_path: Path) -> None:
    not_a_dir = tmp_path / "data"
    not_a_dir.write_text("a file")
    async with open_fake_telegram("1:another-token") as telegram:
        env = clean_env(
            HERMES_MODEL_BASE_URL="http://127.0.0.1:9/v1",
            HERMES_DATA_DIR=str(not_a_dir),
            TELEGRAM_BOT_TOKEN=TOKEN,
            TELEGRAM_API_BASE_URL=telegram.base_url,
            TELEGRAM_ALLOWED_USERS="7",
            API_SERVER_HOST="0.0.0.0",
        )
        result = await doctor(env, tmp_path)
    out = result.stdout.decode()
    assert result.returncode == 1, out
    failed = [line.split(":")[0] for line in out.splitlines() if line.startswith("FAIL")]
    assert failed == [
        "FAIL  model server",
        "FAIL  store",
        "FAIL  api server",
        "FAIL  telegram",
    ]
    assert "127.0.0.1:9" in out and "not reachable" in out
    assert f"store.data_dir {not_a_dir} is not a directory" in out
    assert "api_server.host is 0.0.0.0" in out
    assert TOKEN not in out
    assert "checks failed" in result.stderr.decode()


async def test_the_context_window_line_says_where_the_number_came_from(tmp_path: Path) -> None:
    script = [TextReply("OK"), ToolCallReply([("get_time", {})])] * 2
    async with open_scripted_server(script) as model:
        env = clean_env(HERMES_MODEL_BASE_URL=model.base_url, HERMES_DATA_DIR=str(tmp_path))
        del env["HERMES_CONTEXT_WINDOW"]
        unsaid = await doctor(env, tmp_path)
        configured = await doctor({**env, "HERMES_CONTEXT_WINDOW": "4096"}, tmp_path)
        asked = [f"{r.method} {r.path}" for r in model.requests]
    window = [line for line in unsaid.stdout.decode().splitlines() if "context window" in line]
    assert window == [
        "ok    context window: 32768 tokens assumed (compaction.default_window): the model "
        "server does not say; set model.context_window to the model's real window"
    ]
    assert unsaid.returncode == 0
    window = [line for line in configured.stdout.decode().splitlines() if "context window" in line]
    assert window == ["ok    context window: 4096 tokens, from model.context_window"]
    # The server was asked about its window once, in the first run only.
    assert asked.count("GET /props") == 1 and asked.count("POST /api/show") == 1


async def test_settings_in_env_files_are_used_under_the_environment_and_named(
    tmp_path: Path,
) -> None:
    work, data = tmp_path / "work", tmp_path / "data"
    work.mkdir()
    data.mkdir()
    script = [TextReply("OK"), ToolCallReply([("get_time", {})])]
    async with open_scripted_server(script) as model:
        # The model server comes from the working directory's .env, the API
        # port from the data directory's; the model's name from .env would
        # fail the check, but the environment's wins.
        (work / ".env").write_text(
            f"HERMES_MODEL_BASE_URL={model.base_url}\nHERMES_MODEL=not-listed\n"
            f"HERMES_DATA_DIR={data}\n"
        )
        (data / ".env").write_text("API_SERVER_PORT=8765\nHERMES_MODEL=not-listed-either\n")
        env = clean_env(HERMES_MODEL="scripted-model")
        env.pop("HERMES_DOTENV", None)
        result = await doctor(env, work)
    out = result.stdout.decode()
    assert result.returncode == 0, out + result.stderr.decode()
    lines = out.splitlines()
    assert f"; .env files read: {work / '.env'}, {data / '.env'}" in lines[0]
    assert lines[0].startswith("ok    config: no config file")
    assert any("lists 'scripted-model'" in line for line in lines)
    assert any("would listen on 127.0.0.1:8765" in line for line in lines)
