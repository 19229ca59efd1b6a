"""The settings of the server's HTTP edge: read from file and environment,
refused with one line naming the key when they cannot work."""

from __future__ import annotations

from pathlib import Path

import pytest

from hermes_trio.config import ConfigError, load_config


def test_environment_lists_hosts_and_bounds_connections() -> None:
    config = load_config(env={
        "API_SERVER_ALLOWED_HOSTS": "hermes.lan, .example.com,box:8642",
        "API_SERVER_CORS_ORIGINS": "http://localhost:3000,https://ui.example.com/",
        "API_SERVER_MAX_CONNECTIONS": "32",
    })
    api = config.api_server
    assert api.allowed_hosts == ["hermes.lan", ".example.com", "box:8642"]
    assert api.cors_origins == ["http://localhost:3000", "https://ui.example.com/"]
    assert api.max_connections == 32


@pytest.mark.parametrize(
    ("yaml", "message"),
    [
        ("cors_origins: ['localhost:3000']",
         "api_server.cors_origins[0]: expected an origin like 'http://localhost:3000'"),
        ("cors_origins: ['http://ui.test/app']", "api_server.cors_origins[0]"),
        ("allowed_hosts: ['http://hermes.lan']",
         "api_server.allowed_hosts[0]: expected a host name like 'hermes.lan'"),
        ("allowed_hosts: ['ok.lan', 'two words']", "api_server.allowed_hosts[1]"),
        ("max_connections: 0", "api_server.max_connections: expected an integer of at least 1"),
        ("header_timeout: 0", "api_server.header_timeout: expected a number of seconds above 0"),
        ("body_timeout: 0", "api_server.body_timeout"),
        ("idle_timeout: 0", "api_server.idle_timeout"),
    ],
)
def test_unusable_values_name_the_key(tmp_path: Path, yaml: str, message: str) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(f"api_server:\n  {yaml}\n")
    with pytest.raises(ConfigError) as caught:
        load_config(path, env={})
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


def test_stars_are_accepted(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("api_server:\n  cors_origins: ['*']\n  allowed_hosts: ['*']\n")
    api = load_config(path, env={}).api_server
    assert api.cors_origins == ["*"] and api.allowed_hosts == ["*"]
