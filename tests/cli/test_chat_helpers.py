"""Small decisions of ``hermes-trio chat`` that need no terminal."""

from __future__ import annotations

import dataclasses

import pytest

from hermes_trio.approvals import DEFAULT_APPROVAL_TIMEOUT
from hermes_trio.cli.chat import chat_streams, parse_approval
from hermes_trio.config import Config, ConfigError, StreamingConfig, load_config
from hermes_trio.tools import ApprovalDecision


def with_streaming(**fields: bool | None) -> Config:
    return Config(streaming=dataclasses.replace(StreamingConfig(), **fields))


def test_terminal_streams_unless_told_not_to() -> None:
    assert chat_streams(with_streaming()) is True  # nothing configured
    assert chat_streams(with_streaming(enabled=False)) is True  # the platforms' switch
    assert chat_streams(with_streaming(cli=False)) is False
    assert chat_streams(with_streaming(cli=True, enabled=False)) is True
    assert chat_streams(with_streaming(cli=True), no_stream=True) is False


@pytest.mark.parametrize(
    ("answer", "decision"),
    [
        ("o\n", ApprovalDecision.ONCE),
        ("Yes", ApprovalDecision.ONCE),
        (" a ", ApprovalDecision.ALWAYS),
        ("always", ApprovalDecision.ALWAYS),
        ("d", ApprovalDecision.DENY),
        ("no\n", ApprovalDecision.DENY),
        ("", None),
        ("maybe", None),
    ],
)
def test_parse_approval(answer: str, decision: ApprovalDecision | None) -> None:
    assert parse_approval(answer) is decision


def test_approval_timeout_from_config_and_environment(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert load_config(env={}).approval_timeout("cli") == 300.0
    config = load_config(env={"HERMES_APPROVAL_TIMEOUT": "5"})
    assert config.approvals.timeout == 5.0
    assert config.approval_timeout("cli") == config.approval_timeout() == 5.0
    with pytest.raises(ConfigError, match="HERMES_APPROVAL_TIMEOUT"):
        load_config(env={"HERMES_APPROVAL_TIMEOUT": "soon"})
    with pytest.raises(ConfigError, match=r"approvals\.timeout"):
        load_config(env={"HERMES_APPROVAL_TIMEOUT": "0"})


def test_the_old_approval_timeout_key_still_counts(tmp_path) -> None:
    old = tmp_path / "old.yaml"
    old.write_text("agent:\n  approval_timeout: 45\n")
    assert load_config(old, env={}).approval_timeout("cli") == 45.0
    # The new key wins over the old one; the environment over both.
    both = tmp_path / "both.yaml"
    both.write_text("agent:\n  approval_timeout: 45\napprovals:\n  timeout: 90\n")
    assert load_config(both, env={}).approval_timeout() == 90.0
    assert load_config(old, env={"HERMES_APPROVAL_TIMEOUT": "7"}).approval_timeout() == 7.0
    bad = tmp_path / "bad.yaml"
    bad.write_text("agent:\n  approval_timeout: 0\n")
    with pytest.raises(ConfigError, match=r"^agent\.approval_timeout: expected"):
        load_config(bad, env={})


def test_a_surface_can_wait_longer_or_shorter(tmp_path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(
        "approvals:\n  timeout: 120\n  approvers: [alice, 1234]\n"
        "  per_platform:\n    cli: 30\n    telegram: 900\n"
    )
    config = load_config(path, env={})
    assert config.approval_timeout("cli") == 30.0
    assert config.approval_timeout("telegram") == 900.0
    assert config.approval_timeout("slack") == config.approval_timeout() == 120.0
    assert config.approval_timeout("no-such-surface") == 120.0
    assert config.approvals.approvers == ["alice", "1234"]
    assert load_config(env={"HERMES_APPROVERS": "bob, carol"}).approvals.approvers == [
        "bob",
        "carol",
    ]
    path.write_text("approvals:\n  per_platform:\n    discord: 0\n")
    with pytest.raises(ConfigError, match=r"^approvals\.per_platform\.discord: expected"):
        load_config(path, env={})
    path.write_text("approvals:\n  per_platform:\n    fax: 10\n")
    with pytest.raises(ConfigError, match=r"approvals\.per_platform\.fax: unknown key"):
        load_config(path, env={})


def test_tools_and_config_agree_on_the_default_wait() -> None:
    assert Config().approval_timeout() == DEFAULT_APPROVAL_TIMEOUT
