"""Every public name is exported from one place: the module that defines
it lists it in ``__all__``, and only a package's ``__init__`` lists names
it imports (the package's public surface, like httpx's)."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import hermes_trio

PACKAGE = Path(hermes_trio.__file__).parent


def _exports(tree: ast.Module) -> list[str]:
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(target, ast.Name) and target.id == "__all__" for target in node.targets
        ):
            assert isinstance(node.value, ast.List | ast.Tuple)
            return [item.value for item in node.value.elts if isinstance(item, ast.Constant)]
    return []


def _imported(tree: ast.Module) -> set[str]:
    return {
        alias.asname or alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }


def _modules() -> list[tuple[str, ast.Module]]:
    return [
        (str(path.relative_to(PACKAGE.parent)), ast.parse(path.read_text()))
        for path in sorted(PACKAGE.rglob("*.py"))
    ]


def test_a_module_exports_only_what_it_defines() -> None:
    re_exported = [
        f"{name} from {path}"
        for path, tree in _modules()
        if not path.endswith("__init__.py")
        for name in set(_exports(tree)) & _imported(tree)
    ]
    assert re_exported == []


def test_a_name_has_one_package_facade_besides_the_root() -> None:
    facades: dict[str, list[str]] = defaultdict(list)
    for path, tree in _modules():
        if path.endswith("__init__.py") and path != "hermes_trio/__init__.py":
            for name in _exports(tree):
                facades[name].append(path)
    assert {name: paths for name, paths in facades.items() if len(paths) > 1} == {}
