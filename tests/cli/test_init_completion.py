"""``hermes-trio init`` (flags and a real terminal) and shell completion."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pexpect
import trio
from support import clean_env

from hermes_trio.config import load_config
from hermes_trio.testing import open_scripted_server
from hermes_trio.testing.fake_telegram import open_fake_telegram

TOKEN = "987654:INIT-secret_token_value"
HERMES = [sys.executable, "-m", "hermes_trio.cli"]


async def run(
    args: list[str], env: dict[str, str], cwd: Path
) -> subprocess.CompletedProcess[bytes]:
    with trio.fail_after(60):
        return await trio.run_process(
            [*HERMES, *args],
            env=env,
            cwd=cwd,
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )


async def test_non_interactive_init_writes_a_config_that_round_trips(tmp_path: Path) -> None:
    async with open_scripted_server([]) as model, open_fake_telegram(TOKEN) as telegram:
        env = clean_env(TELEGRAM_API_BASE_URL=telegram.base_url)
        flags = [
            "init", "--non-interactive",
            "--base-url", model.base_url,
            "--model-api-key", "sk-model-secret",
            "--model", "scripted-model",
            "--api-key", "client-secret",
            "--telegram-token", TOKEN,
            "--telegram-users", "7, 8",
        ]  # fmt: skip
        result = await run(flags, env, tmp_path)
        assert result.returncode == 0, result.stderr.decode()
        again = await run(flags, env, tmp_path)
        bad = await run(
            ["init", "--non-interactive", "--force", "--base-url", "http://127.0.0.1:9/v1"],
            env,
            tmp_path,
        )
    output = (result.stdout + result.stderr).decode()
    for secret in ("sk-model-secret", "client-secret", TOKEN):
        assert secret not in output
    path = tmp_path / "config.yaml"
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    config = load_config(str(path))
    assert config.model.base_url == model.base_url
    assert config.model.api_key == "sk-model-secret"
    assert config.model.name == "scripted-model"
    assert config.api_server.key == "client-secret"
    assert config.platforms.telegram.token == TOKEN
    assert [int(u) for u in config.platforms.telegram.allowed_users] == [7, 8]
    # Never overwritten without asking; a bad URL is one line, nothing written.
    assert again.returncode == 2 and b"exists; --force overwrites it" in again.stderr
    assert bad.returncode == 2
    (line,) = bad.stderr.decode().strip().splitlines()
    assert line == "hermes-trio init: cannot reach http://127.0.0.1:9/v1 (ConnectError)"
    assert load_config(str(path)).model.base_url == model.base_url


async def test_interactive_init_refuses_a_bad_url_and_accepts_a_good_one(tmp_path: Path) -> None:
    async with open_scripted_server([]) as model:
        env = clean_env()

        def converse() -> str:
            child = pexpect.spawn(
                sys.executable, ["-m", "hermes_trio.cli", "init"], cwd=str(tmp_path),
                env=env, encoding="utf-8", timeout=30,
            )  # fmt: skip
            child.expect("Model server URL")
            child.sendline("http://127.0.0.1:9/v1")
            child.expect("API key")
            child.sendline("sk-typed-secret")
            child.expect("cannot reach http://127.0.0.1:9/v1 \\(ConnectError\\); try again")
            child.expect("Model server URL")
            child.sendline(model.base_url)
            child.expect("API key")
            child.sendline("")
            child.expect("it lists 1 model")
            child.expect("Model \\[scripted-model\\]")
            child.sendline("")
            child.expect("clients of `serve`")
            child.sendline("")
            child.expect("Telegram")
            child.sendline("")
            child.expect(pexpect.EOF)
            child.close()
            assert child.exitstatus == 0
            return str(child.before)

        transcript = await trio.to_thread.run_sync(converse)
    assert "sk-typed-secret" not in transcript
    config = load_config(str(tmp_path / "config.yaml"))
    assert config.model.base_url == model.base_url and config.model.name == "scripted-model"
    assert config.api_server.key is None


def test_completion_scripts_and_answers(tmp_path: Path) -> None:
    env = clean_env()
    for shell in ("bash", "zsh", "fish"):
        script = subprocess.run(
            [*HERMES, "completion", shell], env=env, capture_output=True, check=True, timeout=60
        ).stdout.decode()
        assert "hermes-trio" in script
    registered = subprocess.run(
        ["bash", "-c", f"source <({sys.executable} -m hermes_trio.cli completion bash); "
                       "complete -p hermes-trio"],
        env=env, capture_output=True, check=True, timeout=60,
    ).stdout.decode()  # fmt: skip
    assert "-F _python_argcomplete hermes-trio" in registered
    answer = tmp_path / "answer"
    line = "hermes-trio serve --wor"
    subprocess.run(
        HERMES,
        env=dict(
            env,
            _ARGCOMPLETE="1",
            COMP_LINE=line,
            COMP_POINT=str(len(line)),
            _ARGCOMPLETE_STDOUT_FILENAME=str(answer),
        ),
        capture_output=True,
        timeout=60,
        check=False,
        pass_fds=(),
    )
    assert "--workers" in answer.read_text()
    assert os.environ.get("_ARGCOMPLETE") is None
