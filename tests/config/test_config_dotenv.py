"""Settings from .env files: the working directory's and the data
directory's, under the real environment, never exported into it."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from hermes_trio.config import ConfigError, load_config


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working directory of its own (the checkout may hold a .env)."""
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    return work


def write_env(directory: Path, text: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / ".env"
    path.write_text(text, encoding="utf-8")
    return path


def test_a_key_in_the_working_directorys_env_is_used(here: Path) -> None:
    path = write_env(here, "HERMES_MODEL=from-dotenv\nAPI_SERVER_PORT=9001\n")
    config = load_config(env={}, dotenv=True)
    assert config.model.name == "from-dotenv"
    assert config.api_server.port == 9001
    assert config.env_files == (str(path),)
    assert "HERMES_MODEL" not in os.environ or os.environ["HERMES_MODEL"] != "from-dotenv"


def test_the_environment_wins_over_every_env_file(here: Path, tmp_path: Path) -> None:
    data = tmp_path / "data"
    write_env(here, "HERMES_MODEL=from-here\n")
    write_env(data, "HERMES_MODEL=from-data\n")
    env = {"HERMES_MODEL": "from-env", "HERMES_DATA_DIR": str(data)}
    assert load_config(env=env, dotenv=True).model.name == "from-env"


def test_the_data_directorys_env_is_read_under_the_working_directorys(
    here: Path, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    there = write_env(data, "HERMES_MODEL=from-data\nHERMES_SYSTEM_PROMPT=be brief\n")
    config = load_config(env={"HERMES_DATA_DIR": str(data)}, dotenv=True)
    assert config.model.name == "from-data"
    assert config.agent.system_prompt == "be brief"
    assert config.env_files == (str(there),)
    mine = write_env(here, "HERMES_MODEL=from-here\n")
    config = load_config(env={"HERMES_DATA_DIR": str(data)}, dotenv=True)
    assert config.model.name == "from-here"
    assert config.agent.system_prompt == "be brief"
    assert config.env_files == (str(mine), str(there))


def test_the_data_directory_may_come_from_the_working_directorys_env_or_the_file(
    here: Path, tmp_path: Path
) -> None:
    by_env, by_file = tmp_path / "a", tmp_path / "b"
    write_env(by_env, "HERMES_MODEL=a\n")
    write_env(by_file, "HERMES_MODEL=b\n")
    write_env(here, f"HERMES_DATA_DIR={by_env}\n")
    assert load_config(env={}, dotenv=True).model.name == "a"
    (here / ".env").unlink()
    (here / "config.yaml").write_text(f"store: {{data_dir: {by_file}}}\n")
    config = load_config(env={}, dotenv=True)
    assert config.model.name == "b" and config.store.data_dir == str(by_file)


def test_a_data_directorys_env_cannot_move_the_data_directory(here: Path, tmp_path: Path) -> None:
    data = tmp_path / "data"
    write_env(data, f"HERMES_DATA_DIR={tmp_path / 'elsewhere'}\nHERMES_CONFIG=/nope.yaml\n")
    config = load_config(env={"HERMES_DATA_DIR": str(data)}, dotenv=True)
    assert config.store.data_dir == str(data) and config.source is None


def test_conventional_variables_and_the_named_key_come_from_env_files_too(here: Path) -> None:
    write_env(here, "OPENAI_BASE_URL=http://127.0.0.1:9/v1\nMY_KEY=sekrit\n")
    (here / "config.yaml").write_text("model: {api_key_env: MY_KEY}\n")
    config = load_config(env={}, dotenv=True)
    assert config.model.base_url == "http://127.0.0.1:9/v1"
    assert config.model.api_key == "sekrit"


def test_a_malformed_line_is_named_and_skipped(
    here: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = write_env(
        here, "# settings\nHERMES_MODEL=m\nthis is not a setting\nAPI_SERVER_PORT=9002\n"
    )
    with caplog.at_level(logging.WARNING):
        config = load_config(env={}, dotenv=True)
    assert config.model.name == "m" and config.api_server.port == 9002
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [f"{path} line 3: not a KEY=VALUE line, ignored"]


def test_a_bad_value_from_an_env_file_names_the_variable(here: Path) -> None:
    write_env(here, "API_SERVER_PORT=many\n")
    with pytest.raises(ConfigError, match="API_SERVER_PORT"):
        load_config(env={}, dotenv=True)


def test_an_unreadable_env_file_is_one_line_naming_it(here: Path) -> None:
    (here / ".env").write_bytes(b"HERMES_MODEL=\xff\xfe\n")
    with pytest.raises(ConfigError, match=r"^\.env file .*\.env: cannot be read"):
        load_config(env={}, dotenv=True)


def test_a_virtual_environment_named_env_is_no_env_file(here: Path) -> None:
    (here / ".env" / "bin").mkdir(parents=True)
    assert load_config(env={}, dotenv=True).env_files == ()


def test_env_files_are_read_for_the_process_environment_unless_it_says_no(
    here: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_env(here, "HERMES_MODEL=from-dotenv\n")
    monkeypatch.setenv("HERMES_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.delenv("HERMES_MODEL", raising=False)
    monkeypatch.delenv("HERMES_DOTENV", raising=False)
    assert load_config().model.name == "from-dotenv"
    assert "HERMES_MODEL" not in os.environ  # read, never exported
    # An environment given by the caller is all there is, unless it asks.
    assert load_config(env={}).model.name is None
    monkeypatch.setenv("HERMES_DOTENV", "0")
    assert load_config().model.name is None
