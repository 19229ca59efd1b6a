"""config.yaml + environment → one validated Config."""

from __future__ import annotations

import pytest

from hermes_trio.config import ConfigError, StreamingConfig, load_config


def write(tmp_path, text: str):
    path = tmp_path / "config.yaml"
    path.write_text(text)
    return path


def test_defaults_without_a_file(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    config = load_config(env={})
    assert config.model.base_url is None
    assert config.streaming.enabled is False
    # None: each platform's own default (registry.edit_interval_for).
    assert config.streaming.edit_interval is None and config.streaming.min_tokens == 20
    assert config.api_server.port == 8642 and config.api_server.model_name == "hermes-agent"
    assert config.source is None


def test_file_values_and_nested_sections(tmp_path) -> None:
    path = write(
        tmp_path,
        """
model:
  base_url: http://127.0.0.1:9999/v1
  name: my-model
  timeouts: {first_token: 30}
  fallbacks:
    - name: backup
streaming:
  enabled: true
  telegram: false
""",
    )
    config = load_config(path, env={})
    assert config.model.name == "my-model"
    assert config.model.timeouts.first_token == 30.0
    assert config.model.timeouts.idle == 60.0
    assert config.model.fallbacks[0].name == "backup"
    assert config.streaming.enabled_for("cli") is True
    assert config.streaming.enabled_for("telegram") is False
    assert config.source == str(path)


def test_hermes_config_env_names_the_file(tmp_path) -> None:
    path = write(tmp_path, "model: {name: from-env-path}\n")
    assert load_config(env={"HERMES_CONFIG": str(path)}).model.name == "from-env-path"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("modle: {}\n", "modle: unknown key"),
        ("model: {nme: x}\n", "model.nme: unknown key"),
        (
            "streaming: {enabled: maybe}\n",
            "streaming.enabled: expected true or false, got str 'maybe'",
        ),
        ("model: {timeouts: {idle: fast}}\n", "model.timeouts.idle: expected a number"),
        ("model: {api_mode: soap}\n", "model.api_mode: expected 'chat_completions' or 'responses'"),
        (
            "model: {base_url: localhost:8000}\n",
            "model.base_url: expected an http:// or https:// URL",
        ),
        ("api_server: {port: 70000}\n", "api_server.port: expected 0-65535"),
        ("agent: {max_iterations: 0}\n", "agent.max_iterations: expected an integer of at least 1"),
        ("agent: {think_tags: [think, '']}\n", 'agent.think_tags[1]: expected a tag name'),
        ("model: [1, 2]\n", "model: expected a mapping, got a list"),
        ("- just a list\n", "expected a mapping of sections"),
        ("model: {name: [unclosed\n", "line"),
    ],
)
def test_bad_values_name_the_key(tmp_path, text: str, message: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_config(path, env={})
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_missing_explicit_file(tmp_path) -> None:
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path / "nope.yaml", env={})


def test_environment_overrides_file_and_openai_fallbacks(tmp_path) -> None:
    path = write(tmp_path, "model: {base_url: 'http://file/v1', name: file-model}\n")
    env = {
        "HERMES_MODEL": "env-model",
        "OPENAI_BASE_URL": "http://openai/v1",
        "OPENAI_API_KEY": "sk-openai",
    }
    config = load_config(path, env=env)
    assert config.model.name == "env-model"
    # The conventional variable fills only what the file left unset.
    assert config.model.base_url == "http://file/v1"
    assert config.model.api_key == "sk-openai"
    env["HERMES_MODEL_BASE_URL"] = "http://hermes/v1"
    assert load_config(path, env=env).model.base_url == "http://hermes/v1"


def test_openai_variables_alone_are_enough(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    config = load_config(env={"OPENAI_BASE_URL": "http://127.0.0.1:1/v1"})
    assert config.model.base_url == "http://127.0.0.1:1/v1"


@pytest.mark.parametrize("word", ["true", "1", "yes", "TRUE"])
def test_streaming_master_switch_from_env(tmp_path, monkeypatch, word: str) -> None:
    monkeypatch.chdir(tmp_path)
    assert load_config(env={"HERMES_STREAMING_ENABLED": word}).streaming.enabled is True


def test_bad_env_value_names_the_variable(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match=r"HERMES_STREAMING_ENABLED .*expected true/false"):
        load_config(env={"HERMES_STREAMING_ENABLED": "perhaps"})
    with pytest.raises(ConfigError, match=r"API_SERVER_PORT .*expected an integer"):
        load_config(env={"API_SERVER_PORT": "eighty"})


def test_api_key_env_indirection(tmp_path) -> None:
    path = write(tmp_path, "model: {api_key_env: MY_KEY}\n")
    assert load_config(path, env={"MY_KEY": "sekrit"}).model.api_key == "sekrit"
    with pytest.raises(ConfigError, match=r"model.api_key_env: environment variable MY_KEY"):
        load_config(path, env={})


def test_yolo_from_env_and_lists_from_env(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    config = load_config(
        env={
            "HERMES_YOLO_MODE": "1",
            "TELEGRAM_ALLOWED_USERS": "12, 34",
            "API_SERVER_CORS_ORIGINS": "http://a,http://b",
        }
    )
    assert config.agent.yolo is True
    assert config.platforms.telegram.allowed_users == [12, 34]
    assert config.api_server.cors_origins == ["http://a", "http://b"]


def test_stream_precedence() -> None:
    # request field > per-consumer override > master switch > off
    assert StreamingConfig().enabled_for("api_server") is False
    assert StreamingConfig(enabled=True).enabled_for("api_server") is True
    assert StreamingConfig(enabled=True, api_server=False).enabled_for("api_server") is False
    assert StreamingConfig(enabled=False, telegram=True).enabled_for("telegram") is True
    assert StreamingConfig(enabled=False).enabled_for("api_server", request_stream=True) is True
    assert StreamingConfig(api_server=True).enabled_for("api_server", request_stream=False) is False


def test_overrides_win(tmp_path) -> None:
    path = write(tmp_path, "agent: {yolo: false}\n")
    config = load_config(path, env={}, overrides={"agent.yolo": True, "model.name": "flag"})
    assert config.agent.yolo is True and config.model.name == "flag"


def test_a_broken_file_is_reported_even_where_a_flag_overrides_it(tmp_path) -> None:
    path = write(tmp_path, "api_server: {port: eighty}\n")
    with pytest.raises(ConfigError, match=r"api_server\.port: expected an integer"):
        load_config(path, env={}, overrides={"api_server.port": 8080})
