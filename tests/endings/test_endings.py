"""How a turn ended is typed (``hermes_trio.endings``): mypy checks every
comparison of a finish reason, and no code compares an error code or a
cancel cause as text outside the wire encoders."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import trio

import hermes_trio
from hermes_trio import metrics
from hermes_trio.endings import CancelCause, ErrorCode
from hermes_trio.turn import Turn

PACKAGE = Path(hermes_trio.__file__).parent

# The wire encoders write the endings into JSON as text; the kit's scripted
# model server speaks the wire, not the turn's types.
WIRE = ("wire/", "testing/", "consumers/sse.py", "consumers/responses_sse.py", "endings.py")

OUR_CODES = {code.value for code in ErrorCode}
CANCEL_WORDS = {cause.words for cause in CancelCause} - {CancelCause.INTERRUPTED.words}
TYPED_FIELDS = {"error_code", "interrupted", "cause"}


def _texts(node: ast.expr) -> list[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return [t for item in node.elts for t in _texts(item)]
    return []


def _field(node: ast.expr) -> str | None:
    name = node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", None)
    return name if name in TYPED_FIELDS else None


def _offences(tree: ast.Module) -> list[tuple[int, str]]:
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            texts = [t for operand in operands for t in _texts(operand)]
            fields = [f for operand in operands if (f := _field(operand))]
            if set(texts) & (OUR_CODES | CANCEL_WORDS):
                found.append((node.lineno, f"compares with {sorted(set(texts))}"))
            elif fields and texts:
                found.append((node.lineno, f"compares {fields[0]} with text"))
        elif isinstance(node, ast.Constant) and node.value in CANCEL_WORDS:
            found.append((node.lineno, f"spells the cause {node.value!r}"))
    return found


def test_no_ending_is_compared_as_text_outside_the_wire() -> None:
    offences = [
        f"{path.relative_to(PACKAGE)}:{line}: {what}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if not str(path.relative_to(PACKAGE)).startswith(WIRE)
        for line, what in _offences(ast.parse(path.read_text()))
    ]
    assert offences == []


def test_the_guard_sees_a_text_comparison() -> None:
    tree = ast.parse(
        'if code == "internal_error": pass\n'
        'if turn.interrupted == "client went away": pass\n'
        'if end.error_code in ("x", "y"): pass\n'
        'turn.cancel("client went away")\n'
        "if code == ErrorCode.INTERNAL_ERROR: pass\n"
    )
    assert sorted(line for line, _ in _offences(tree)) == [1, 2, 2, 3, 4]


def test_mypy_rejects_a_misspelt_ending(tmp_path: Path) -> None:
    snippet = tmp_path / "snippet.py"
    snippet.write_text(
        "from hermes_trio.endings import ErrorCode\n"
        "from hermes_trio.events import TurnFinished\n"
        "from hermes_trio.turn import TurnResult\n"
        "def stopped(end: TurnFinished) -> bool:\n"
        '    return end.finish_reason == "stopp"\n'
        "def cut(end: TurnResult) -> bool:\n"
        '    return end.finish_reason != "lenght"\n'
        "def slow(code: str | None) -> bool:\n"
        "    return code == ErrorCode.MODEL_TIMEOUTT\n"
        "def fine(end: TurnFinished) -> bool:\n"
        '    return end.finish_reason == "stop" and end.error_code != ErrorCode.MODEL_ERROR\n'
        "bad = TurnFinished('', finish_reason='done')\n"
    )
    ran = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--follow-imports=silent",
            "--cache-dir",
            str(tmp_path / "cache"),
            str(snippet),
        ],
        capture_output=True,
        text=True,
        cwd=PACKAGE.parent,
        check=False,
    )
    kinds: dict[int, set[str]] = {}
    for line in ran.stdout.splitlines():
        if ": error:" in line:
            kinds.setdefault(int(line.split(":")[1]), set()).add(line.rsplit("[", 1)[-1])
    assert sorted(kinds) == [5, 7, 9, 12], ran.stdout
    assert "comparison-overlap]" in kinds[5] & kinds[7] and "attr-defined]" in kinds[9]
    assert kinds[12] == {"arg-type]"}


async def test_a_cancel_keeps_its_words_and_its_cause() -> None:
    gone = Turn()
    gone.cancel(CancelCause.CLIENT_GONE)
    gone.cancel("later")
    assert (gone.interrupted, gone.cause) == ("client went away", CancelCause.CLIENT_GONE)
    assert type(gone.interrupted) is str
    told = Turn()
    told.cancel("interrupted by a new message")
    assert (told.interrupted, told.cause) == ("interrupted by a new message", "interrupted")
    stopping = Turn()
    await stopping.stop("the server is shutting down", grace=0, cause=CancelCause.SHUTDOWN)
    assert stopping.cause is CancelCause.SHUTDOWN
    assert Turn().cause is None
    await trio.lowlevel.checkpoint()


def test_the_metrics_label_a_turn_by_its_typed_ending() -> None:
    assert metrics.turn_outcome("stop", None, None) == "finished"
    assert metrics.turn_outcome("error", ErrorCode.MODEL_TIMEOUT, None) == "error:model_timeout"
    assert metrics.turn_outcome("error", "invalid_request_error", None) == (
        "error:invalid_request_error"
    )
    assert metrics.turn_outcome("interrupted", None, CancelCause.CLIENT_GONE) == "client_gone"
    assert metrics.turn_outcome("interrupted", None, CancelCause.SHUTDOWN) == "interrupted"
    assert metrics.turn_outcome("stop", None, CancelCause.INTERRUPTED) == "interrupted"


def test_an_error_code_is_ours_or_the_model_servers() -> None:
    assert ErrorCode.of("model_timeout") is ErrorCode.MODEL_TIMEOUT
    assert ErrorCode.of("invalid_request_error") is None and ErrorCode.of(None) is None
    # The wire carries the same text as before.
    assert ErrorCode.INTERNAL_ERROR == "internal_error" and f"{ErrorCode.MODEL_ERROR}" == (
        "model_error"
    )
