"""No import cycle in hermes_trio, function-level and TYPE_CHECKING imports
included, and every function-level import says why it is there.

A cycle works until someone imports the other module first; the layer
contracts in pyproject.toml see only module-level imports between layers,
so this walks every ``import`` statement with ``ast`` instead.
"""

from __future__ import annotations

import ast
import itertools
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "hermes_trio"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {module_name(path): path for path in PACKAGE.rglob("*.py")}


def imported(node: ast.Import | ast.ImportFrom, module: str, is_package: bool) -> list[str]:
    """The package's modules ``node`` imports (``from a import b``: a.b if
    that is a module, else a)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names if alias.name in MODULES]
    base = node.module or ""
    if node.level:
        package = module.split(".") if is_package else module.split(".")[:-1]
        package = package[: len(package) - (node.level - 1)]
        base = ".".join([*package, *([node.module] if node.module else [])])
    found = []
    for alias in node.names:
        if f"{base}.{alias.name}" in MODULES:
            found.append(f"{base}.{alias.name}")
        elif base in MODULES:
            found.append(base)
    return found


def import_graph() -> dict[str, dict[str, int]]:
    """module → {module it imports: line of the first such import}."""
    graph: dict[str, dict[str, int]] = {}
    for module, path in MODULES.items():
        edges: dict[str, int] = {}
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import | ast.ImportFrom):
                for target in imported(node, module, path.name == "__init__.py"):
                    if target != module:
                        edges.setdefault(target, node.lineno)
        graph[module] = edges
    return graph


def find_cycle(graph: dict[str, dict[str, int]]) -> list[str] | None:
    """One cycle (its modules, the first repeated at the end), if any."""
    state: dict[str, str] = {}  # "open" while on the path, "done" after

    def visit(module: str, path: list[str]) -> list[str] | None:
        state[module] = "open"
        path.append(module)
        for target in sorted(graph[module]):
            if state.get(target) == "open":
                return [*path[path.index(target) :], target]
            if target not in state and (cycle := visit(target, path)):
                return cycle
        path.pop()
        state[module] = "done"
        return None

    for module in sorted(graph):
        if module not in state and (cycle := visit(module, [])):
            return cycle
    return None


def test_no_import_cycle() -> None:
    graph = import_graph()
    cycle = find_cycle(graph)
    if cycle is not None:
        steps = [f"{a} (line {graph[a][b]})" for a, b in itertools.pairwise(cycle)]
        pytest.fail("import cycle: " + " -> ".join([*steps, cycle[-1]]))


def test_the_cycle_finder_names_a_cycle() -> None:
    graph = {"a": {"b": 3}, "b": {"c": 5}, "c": {"a": 7}, "d": {"a": 1}}
    assert find_cycle(graph) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b": 1}, "b": {}}) is None


def test_every_function_level_import_says_why() -> None:
    # Allowed where it buys start-up time (a command that never needs the
    # web stack does not load it); the comment above the import says which.
    silent = []
    for module, path in MODULES.items():
        lines = path.read_text().splitlines()
        for function in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for node in ast.walk(function):
                if isinstance(node, ast.Import | ast.ImportFrom):
                    above = node.lineno - 2
                    while above >= 0 and lines[above].strip().startswith(("import ", "from ")):
                        above -= 1
                    if above < 0 or not lines[above].strip().startswith("#"):
                        silent.append(f"{module}:{node.lineno}")
    assert not silent, "function-level imports without a reason comment: " + ", ".join(
        sorted(set(silent))
    )
