"""Record a turn, replay it exactly: on MockClock (tool call, client gone,
model error), an edited recording, secrets, file modes."""

from __future__ import annotations

import itertools
import json
import stat
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from hermes_trio.agent import open_agent
from hermes_trio.approvals import ApprovalChannel
from hermes_trio.cli.main import build_parser, overrides_from
from hermes_trio.cli.replay import run_replay
from hermes_trio.config import AgentConfig, Config, ModelConfig
from hermes_trio.events import StreamEvent
from hermes_trio.recording import Recorder, RecordingError
from hermes_trio.redaction import REDACTED, register_secret
from hermes_trio.testing import (
    ErrorFrame,
    ErrorReply,
    ModelDouble,
    Recording,
    TextReply,
    ToolCallReply,
    replay,
)

FIXTURE = Path(__file__).parent / "tool_call_turn.json"
MODEL_KEY = "sk-model-key-for-recording-0123456789"
TOOL_SECRET = "platform-token-abcdef0123456789"


def main(argv: list[str]) -> int:
    """``hermes-trio replay FILE…`` in this process (``cli.main.main`` would
    also set up the process's logging, for every later test)."""
    args = build_parser().parse_args(argv)
    return run_replay(Config(), args)


def _config(agent: AgentConfig | None = None) -> Config:
    return Config(
        model=ModelConfig(base_url=ModelDouble.base_url, name="m", api_key=MODEL_KEY),
        agent=agent or AgentConfig(yolo=True, long_tool_hint=0),
    )


def _record(
    directory: Path,
    script: list,
    prompt: str,
    *,
    cancel_at: float | None = None,
    mock: bool = True,
    config: AgentConfig | None = None,
    **options: Any,
) -> Path:
    """Run one turn with a recorder (on MockClock unless ``mock`` is False:
    a real tool process needs real time); the path of its file."""

    async def run() -> None:
        model = ModelDouble(script)
        recorder = Recorder(directory)
        async with open_agent(_config(config), transport=model, record=recorder) as agent:
            send, receive = trio.open_memory_channel[StreamEvent](64)
            with trio.CancelScope() as scope:
                async with trio.open_nursery() as nursery:
                    history = [{"role": "user", "content": prompt}]
                    nursery.start_soon(partial(agent.run_turn, history, send, **options))
                    if cancel_at is not None:
                        await trio.sleep(cancel_at)
                        scope.cancel()
                    async with receive:
                        async for _ in receive:
                            pass

    trio.run(run, clock=trio.testing.MockClock(autojump_threshold=0) if mock else None)
    files = sorted(directory.glob("turn-*.json"))
    assert len(files) == 1
    return files[0]


def test_a_tool_call_turn_replays_to_the_same_events_and_times(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    register_secret(MODEL_KEY)
    register_secret(TOOL_SECRET)
    # The tool prints the token; the user's message holds it too.
    monkeypatch.setenv("RECORDING_TEST_TOKEN", TOOL_SECRET)
    command = 'echo hi; echo "$RECORDING_TEST_TOKEN"'
    path = _record(
        tmp_path / "rec",
        [
            ToolCallReply([("terminal", {"command": command})], delay=0.01),
            TextReply("It said hi.", delay=0.05),
        ],
        f"run echo, my token is {TOOL_SECRET}",
        mock=False,
    )
    text = path.read_text()
    # No key, token or Authorization value, however it was sent.
    assert MODEL_KEY not in text and TOOL_SECRET not in text
    assert "authorization" not in text.lower()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    result = replay(Recording.load(path))
    assert result.matches, result.difference
    assert result.text() == "It said hi."
    finished = [e.event for e in result.events if type(e.event).__name__ == "ToolCallFinished"]
    assert finished[0].result == f"hi\n{REDACTED}"  # type: ignore[attr-defined]
    # The answer's words came about 0.05 s apart after the tool, on the virtual clock.
    chunks = [e.at for e in result.events if type(e.event).__name__ == "MessageChunk"]
    assert [round(b - a, 2) for a, b in itertools.pairwise(chunks)] == [0.05, 0.05]


def test_a_secret_the_model_streams_in_pieces_is_taken_out(tmp_path: Path) -> None:
    register_secret(TOOL_SECRET)
    pieces = [TOOL_SECRET[i : i + 3] for i in range(0, len(TOOL_SECRET), 3)]
    path = _record(tmp_path, [TextReply(tokens=["Your token: ", *pieces])], "my token?")
    text = path.read_text()
    document = json.loads(text)
    streamed = "".join(
        e["data"].get("text", "") for e in document["events"] if e["type"] == "MessageChunk"
    )
    pieces_text = "".join(p.get("text", "") for x in document["exchanges"] for p in x["pieces"])
    assert TOOL_SECRET not in streamed and TOOL_SECRET[:8] not in pieces_text
    assert TOOL_SECRET not in text.replace("\n", "").replace('"', "")
    with pytest.raises(RecordingError, match="streamed in pieces"):
        Recording.load(path)


def test_a_client_gone_mid_answer_replays_the_cancel(tmp_path: Path) -> None:
    path = _record(
        tmp_path, [TextReply("one two three four five six", delay=0.5)], "count", cancel_at=1.2
    )
    recording = Recording.load(path)
    assert recording.cancelled is not None and recording.cancelled["at"] == pytest.approx(1.2)
    result = replay(recording)
    assert result.matches, result.difference
    assert [round(e.at, 3) for e in result.events] == [0.0, 0.5, 1.0]
    assert not any(type(e.event).__name__ == "TurnFinished" for e in result.events)


def test_a_model_error_replays_to_the_same_ending(tmp_path: Path) -> None:
    path = _record(tmp_path, [ErrorFrame(text="partial answer", message="upstream exploded")], "hi")
    result = replay(Recording.load(path))
    assert result.matches, result.difference
    end = result.events[-1].event
    assert type(end).__name__ == "TurnFinished" and "upstream exploded" in (end.error or "")  # type: ignore[union-attr]


def test_a_retried_request_replays_after_its_recorded_pause(tmp_path: Path) -> None:
    path = _record(tmp_path, [ErrorReply(503), TextReply("second try", delay=0.1)], "hi")
    recording = Recording.load(path)
    # After the questions about the model's window, the two model requests.
    asked = [e for e in recording.exchanges if str(e["url"]).endswith("/chat/completions")]
    retry_at = asked[1]["at"]
    assert retry_at > 0.25  # the backoff's random pause, recorded
    result = replay(recording)
    assert result.matches, result.difference
    assert result.events[0].at == pytest.approx(retry_at)


def test_an_approval_that_expired_replays_at_its_times(tmp_path: Path) -> None:
    path = _record(
        tmp_path,
        [ToolCallReply([("terminal", {"command": "reboot"})]), TextReply("Not allowed.")],
        "reboot",
        approvals=ApprovalChannel(requester="alice", timeout=30.0),
        config=AgentConfig(yolo=False, long_tool_hint=0),
    )
    result = replay(Recording.load(path))
    assert result.matches, result.difference
    timed = {type(e.event).__name__: round(e.at, 3) for e in result.events}
    assert timed["ApprovalResolved"] - timed["ApprovalRequested"] == 30.0
    assert timed["ToolCallFinished"] == timed["ApprovalResolved"]
    assert result.events[-1].event.text == "Not allowed."  # type: ignore[attr-defined]


def test_an_edited_chunk_makes_replay_exit_1_naming_it(tmp_path: Path, capsys) -> None:
    document = json.loads(FIXTURE.read_text())
    pieces = document["exchanges"][1]["pieces"]
    target = next(i for i, p in enumerate(pieces) if "said" in p.get("text", ""))
    pieces[target]["text"] = pieces[target]["text"].replace("said", "SAID")
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps(document))
    assert main(["replay", str(edited)]) == 1
    err = capsys.readouterr().err
    assert f"model request 2, chunk {target + 1}" in err and "SAID" in err
    assert main(["replay", str(FIXTURE)]) == 0
    assert "ToolCallFinished" in capsys.readouterr().out
    (tmp_path / "not.json").write_text("{}")
    assert main(["replay", str(tmp_path / "not.json")]) == 2


def test_the_tool_output_reaches_the_answer() -> None:
    # As the manual shows (docs/recording.md): a recording in tests/ replayed
    # with the public helper.
    result = replay(Recording.load(FIXTURE))
    assert result.matches, result.difference
    assert result.text() == "It said hi."
    finished = [e for e in result.events if type(e.event).__name__ == "ToolCallFinished"]
    assert finished[0].event.result == "hi" and finished[0].at < 0.1  # type: ignore[attr-defined]


def test_old_recordings_are_pruned_past_the_total_cap(tmp_path: Path) -> None:
    recorder = Recorder(tmp_path / "r", max_file_bytes=1024, max_total_bytes=2500)
    paths = [recorder.save("x" * 1000) for _ in range(4)]
    left = sorted(p.name for p in (tmp_path / "r").iterdir())
    assert paths[-1].name in left and len(left) == 2


def test_a_turn_past_the_file_cap_is_cut_and_not_replayed(tmp_path: Path, capsys) -> None:
    model = ModelDouble([TextReply("word " * 400)])

    async def run() -> None:
        recorder = Recorder(tmp_path, max_file_bytes=2048)
        async with open_agent(_config(), transport=model, record=recorder) as agent:
            await agent.ask("talk")

    trio.run(run, clock=trio.testing.MockClock(autojump_threshold=0))
    (path,) = tmp_path.glob("turn-*.json")
    assert json.loads(path.read_text())["truncated"] is True
    assert path.stat().st_size < 2048 + 16 * 1024  # the settings and the request body
    assert main(["replay", str(path)]) == 2
    assert "record.max_file_bytes" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["serve", "chat", "gateway"])
def test_record_is_a_flag_of_every_command_that_runs_turns(command: str) -> None:
    args = build_parser().parse_args([command, "--record", "/some/dir"])
    assert overrides_from(args)["record.dir"] == "/some/dir"


def test_a_setting_this_version_lacks_is_named(tmp_path: Path, capsys) -> None:
    document = json.loads(FIXTURE.read_text())
    document["turn"]["settings"]["agent"]["no_such_setting"] = 1
    path = tmp_path / "odd.json"
    path.write_text(json.dumps(document))
    assert main(["replay", str(path)]) == 2
    err = capsys.readouterr().err
    assert "turn.settings" in err and "no_such_setting" in err
