"""Only the turn primitive (``hermes_trio/turn.py``) opens a turn: nothing
else in the package creates a channel of stream events, holds the sending
side of one, or drives ``Agent.run_turn`` by hand. Checked on the syntax
tree of every module, so a new runner that opens its own turn fails here."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import hermes_trio
from hermes_trio import events

PACKAGE = Path(hermes_trio.__file__).parent
SUPPORT = Path(__file__).resolve().parents[1] / "support.py"
OWNER = PACKAGE / "turn.py"
# The agent produces a turn's events into the channel the primitive gives it.
# The recorder wraps that channel to copy each event as the agent sends it.
PRODUCERS = {OWNER, PACKAGE / "agent.py", PACKAGE / "recording" / "recorder.py"}
# Relays pass every event of a turn they were given on to the next consumer
# (the gateway's approval prompts in front of the message editor): they
# hold a channel of stream events, but open no turn and run no agent.
RELAYS = {PACKAGE / "consumers" / "approval_prompts.py"}
EVENT_TYPES = frozenset(events.__all__)


def _names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)} | {
        n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)
    }


def _callee(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def violations(source: str, *, producer: bool = False, relay: bool = False) -> list[str]:
    """What in ``source`` opens or drives a turn by hand (line: what)."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        # open_memory_channel[<an event type>](...), or an untyped one, whose
        # item type nobody can check.
        if isinstance(node, ast.Call):
            func = node.func
            typed = isinstance(func, ast.Subscript)
            target = func.value if isinstance(func, ast.Subscript) else func
            if _callee(target) == "open_memory_channel":
                if not typed:
                    found.append(f"{node.lineno}: an untyped memory channel")
                elif (
                    not relay
                    and isinstance(func, ast.Subscript)
                    and _names(func.slice) & EVENT_TYPES
                ):
                    found.append(f"{node.lineno}: a channel of stream events")
        # The sending side of a channel of events: a producer of a turn.
        if (
            not producer
            and isinstance(node, ast.Subscript)
            and _callee(node.value) == "MemorySendChannel"
            and _names(node.slice) & EVENT_TYPES
        ):
            found.append(f"{node.lineno}: the sending side of a channel of stream events")
        # `<agent>.run_turn`: the agent's own loop, which only the primitive
        # runs (`turn.run_turn`, the primitive's module attribute, is fine).
        if (
            isinstance(node, ast.Attribute)
            and node.attr == "run_turn"
            and not (isinstance(node.value, ast.Name) and node.value.id == "turn")
        ):
            found.append(f"{node.lineno}: Agent.run_turn driven by hand")
    return found


def _modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if p != OWNER)


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_module_but_the_primitive_opens_a_turn(path: Path) -> None:
    found = violations(
        path.read_text(encoding="utf-8"), producer=path in PRODUCERS | RELAYS, relay=path in RELAYS
    )
    assert not found, f"{path.relative_to(PACKAGE)} opens a turn by hand: {found}"


def test_the_primitive_is_where_the_channel_is_opened() -> None:
    assert violations(OWNER.read_text(encoding="utf-8"), producer=True)


def test_the_tests_run_their_turns_through_the_primitive() -> None:
    source = SUPPORT.read_text(encoding="utf-8")
    assert not violations(source)
    tree = ast.parse(source)
    calls = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "run_turn"
    ]
    assert calls, "tests/support.py runs no turn through hermes_trio.turn"
    imports = [node for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module]
    assert any(
        node.module == "hermes_trio" and any(a.name == "turn" for a in node.names)
        for node in imports
    )


@pytest.mark.parametrize(
    ("source", "what"),
    [
        (
            "send, receive = trio.open_memory_channel[StreamEvent](8)",
            "a channel of stream events",
        ),
        ("s, r = open_memory_channel[MessageChunk | TurnFinished](0)", "a channel of stream"),
        ("s, r = trio.open_memory_channel(8)", "an untyped memory channel"),
        (
            "async def f(send: trio.MemorySendChannel[StreamEvent]) -> None: ...",
            "the sending side",
        ),
        ("nursery.start_soon(agent.run_turn, messages, send)", "Agent.run_turn"),
        ("result = await self.agent.run_turn(messages, send)", "Agent.run_turn"),
    ],
)
def test_the_check_sees_a_turn_opened_by_hand(source: str, what: str) -> None:
    (found,) = violations(source)
    assert what in found


def test_the_check_lets_consumers_and_other_channels_be() -> None:
    source = (
        "s, r = trio.open_memory_channel[InboundMessage](8)\n"
        "async def show(receive: trio.MemoryReceiveChannel[StreamEvent]) -> None: ...\n"
        "await turn.run_turn(agent, messages, show)\n"
        "await run_turn(agent, messages, show)\n"
    )
    assert violations(source) == []
