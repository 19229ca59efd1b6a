"""The recording document's TypedDicts (hermes_trio/recording/document.py)
name exactly the fields a recording file holds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hermes_trio.recording.document import (
    ExchangeEnd,
    ExchangeRecord,
    PieceRecord,
    RecordedAgent,
    RecordedModel,
    RecordedOptions,
    RecordedTurn,
    RecordingDocument,
    ToolRecord,
)
from hermes_trio.recording.tape import parse

SAMPLE = Path(__file__).parent / "tool_call_turn.json"


def _keys(typed: Any) -> set[str]:
    return set(typed.__annotations__)


def test_the_sample_recording_fits_the_document_types() -> None:
    document = parse(SAMPLE.read_text(encoding="utf-8"), where=str(SAMPLE))
    # All but "removed", which only a recording that cannot be replayed has.
    assert set(document) == _keys(RecordingDocument) - {"removed"}
    turn = document["turn"]
    assert set(turn) == _keys(RecordedTurn)
    assert set(turn["options"]) == _keys(RecordedOptions)
    settings = turn["settings"]
    assert set(settings["model"]) <= _keys(RecordedModel)
    assert set(settings["agent"]) == _keys(RecordedAgent)
    for exchange in document["exchanges"]:
        assert set(exchange) <= _keys(ExchangeRecord)
        for piece in exchange["pieces"]:
            assert set(piece) <= _keys(PieceRecord)
        if "end" in exchange:
            assert set(exchange["end"]) <= _keys(ExchangeEnd)
    assert document["tools"]
    for tool in document["tools"]:
        assert set(tool) == _keys(ToolRecord)
    for event in document["events"]:
        assert set(event) == {"at", "type", "data"}
