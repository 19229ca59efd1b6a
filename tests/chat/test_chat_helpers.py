"""Small decisions of ``hermes-trio chat`` that need no terminal."""

from __future__ import annotations

import dataclasses

import pytest

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
    assert load_config(env={}).agent.approval_timeout == 60.0
    assert load_config(env={"HERMES_APPROVAL_TIMEOUT": "5"}).agent.approval_timeout == 5.0
    with pytest.raises(ConfigError, match="HERMES_APPROVAL_TIMEOUT"):
        load_config(env={"HERMES_APPROVAL_TIMEOUT": "soon"})
    with pytest.raises(ConfigError, match=r"agent\.approval_timeout"):
        load_config(env={"HERMES_APPROVAL_TIMEOUT": "0"})
