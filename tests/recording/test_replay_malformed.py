"""``hermes-trio replay`` on files that are not recordings: the real command,
run on crafted variants of a real recording, exits 2 with one line on stderr
that names where the file is wrong — never a traceback, never a hang, and
never a replayed turn that crashes on what the file held."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support import clean_env, run_cli

FIXTURE = Path(__file__).parent / "tool_call_turn.json"
TEXT = FIXTURE.read_text(encoding="utf-8")
DOCUMENT = json.loads(TEXT)


def _edit(change: Callable[[dict[str, Any]], Any]) -> str:
    document = copy.deepcopy(DOCUMENT)
    change(document)
    return json.dumps(document)


def _set(*path: str | int, to: Any) -> str:
    def change(document: dict[str, Any]) -> None:
        node: Any = document
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = to

    return _edit(change)


def _drop(*path: str | int) -> str:
    def change(document: dict[str, Any]) -> None:
        node: Any = document
        for key in path[:-1]:
            node = node[key]
        del node[path[-1]]

    return _edit(change)


def _approval(data: dict[str, Any]) -> str:
    return _edit(
        lambda d: d["events"].insert(0, {"at": 0, "type": "ApprovalRequested", "data": data})
    )


# name: (the file's bytes or text, what the one line on stderr must name)
VARIANTS: dict[str, tuple[str | bytes, str]] = {
    "bad-utf8": (TEXT.encode().replace(b"It said", b"It \xff\xfesaid", 1), "byte offset"),
    "5000-digit-integer": (
        TEXT.replace('"max_iterations": 20', '"max_iterations": ' + "9" * 5000),
        "turn.settings.agent.max_iterations",
    ),
    "100000-nested-brackets": (
        TEXT.replace('"params": null', '"params": ' + "[" * 100_000 + "]" * 100_000),
        "line 16 column 111",
    ),
    "exchanges-are-numbers": (_set("exchanges", to=[1, 2]), "exchanges[0]"),
    "event-time-a-string": (_set("events", 0, "at", to="soon"), "events[0].at"),
    "tool-index-a-string": (_set("tools", 0, "index", to="zero"), "tools[0].index"),
    "status-a-string": (_set("exchanges", 0, "status", to="ok"), "exchanges[0].status"),
    "headers-not-pairs": (_set("exchanges", 0, "headers", to=[["a"]]), "exchanges[0].headers[0]"),
    "end-a-number": (_set("exchanges", 0, "end", to=5), "exchanges[0].end"),
    "options-a-string": (_set("turn", "options", to="x"), "turn.options"),
    "unknown-option": (_set("turn", "options", "bogus", to=1), "turn.options.bogus"),
    "settings-model-a-list": (_set("turn", "settings", "model", to=[1]), "turn.settings.model"),
    "timeout-a-string": (
        _set("turn", "settings", "model", "timeouts", "idle", to="x"),
        "turn.settings.model.timeouts.idle",
    ),
    "think-tags-a-number": (
        _set("turn", "settings", "agent", "think_tags", to=5),
        "turn.settings.agent.think_tags",
    ),
    "think-tag-empty": (
        _set("turn", "settings", "agent", "think_tags", 1, to=""),
        "turn.settings.agent.think_tags[1]",
    ),
    "channel-size-negative": (
        _set("turn", "settings", "agent", "channel_size", to=-1),
        "turn.settings.agent.channel_size",
    ),
    "messages-a-number": (_set("turn", "messages", to=5), "turn.messages"),
    "message-without-role": (_set("turn", "messages", 0, to={"content": "x"}), "turn.messages[0]"),
    "body-tools-numbers": (
        _set("exchanges", 0, "body", "tools", to=[5]),
        "exchanges[0].body.tools[0]",
    ),
    "url-unparseable": (_set("exchanges", 0, "url", to="http://[::1"), "exchanges[0].url"),
    "tool-duration-null": (_set("tools", 0, "duration", to=None), "tools[0].duration"),
    "event-data-null": (_set("events", 1, "data", to=None), "events[1].data"),
    "piece-after-null": (
        _set("exchanges", 0, "pieces", 0, "after", to=None),
        "exchanges[0].pieces[0].after",
    ),
    "cancelled-at-null": (_set("cancelled", to={"at": None, "cause": "x"}), "cancelled.at"),
    "tool-name-missing": (_drop("tools", 0, "name"), "tools[0].name"),
    "event-time-missing": (_drop("events", 0, "at"), "events[0].at"),
    "time-negative": (_set("events", 0, "at", to=-1), "events[0].at"),
    "time-nan": (
        TEXT.replace('"after": 0.000559', '"after": NaN', 1),
        "exchanges[0].pieces[0].after",
    ),
    "time-infinite": (_set("tools", 0, "duration", to=1e400), "tools[0].duration"),
    "piece-not-base64": (
        _set("exchanges", 0, "pieces", 0, to={"after": 0.1, "base64": "abc"}),
        "exchanges[0].pieces[0].base64",
    ),
    "event-type-unknown": (_set("events", 0, "type", to="Nope"), "events[0].type"),
    "approval-index-a-string": (_approval({"index": "x"}), "events[0].data"),
    "approval-unknown-field": (_approval({"bogus": 1}), "events[0].data"),
    "top-level-array": (json.dumps([DOCUMENT]), "top level"),
    "empty-file": ("", "line 1"),
    # Past the 64 MiB a replay reads.
    "huge-string": (_set("tools", 0, "result", to="x" * (65 * 1024 * 1024)), "64 MiB"),
}


@pytest.mark.parametrize("name", sorted(VARIANTS))
async def test_replay_names_where_a_malformed_file_is_wrong(name: str, tmp_path: Path) -> None:
    content, where = VARIANTS[name]
    path = tmp_path / f"{name}.json"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    done = await run_cli(["replay", str(path)], clean_env(), tmp_path, within=60)
    err = done.stderr.decode("utf-8", "replace")
    assert "Traceback" not in err, err
    lines = err.splitlines()
    assert done.returncode == 2, err
    assert len(lines) == 1, err
    assert lines[0].startswith(f"hermes-trio replay: {path}: "), err
    assert where in lines[0], err
    assert done.stdout == b""
