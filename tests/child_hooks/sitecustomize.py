"""Test-only start-up hook for the hermes-trio processes the tests start
(``support.clean_env`` puts this directory on their ``PYTHONPATH``).

``HERMES_TEST_PATCHES`` (JSON, ``{"module": {"NAME": value}}``) sets module
constants as each named module is first imported, in the process and in any
child it starts with its environment (``serve --workers`` workers). Only
waits that no test measures are shortened this way, so that an end-to-end
test does not sit out a production latency bound (a one-second idle poll)
while it checks something else. A name the module does not define fails
the process at import, so a renamed constant cannot silently stop counting.

``HERMES_TEST_MODULES_AT_EXIT`` (a directory) makes each process write the
names in ``sys.modules`` as it exits, one a line, to ``<pid>.modules`` there:
what a command imported in its whole life (tests/cli/test_lean_imports.py).
"""

from __future__ import annotations

import atexit
import json
import os
import sys
from importlib.abc import Loader, MetaPathFinder
from importlib.machinery import ModuleSpec
from types import ModuleType
from typing import Any

_PATCHES: dict[str, dict[str, Any]] = json.loads(os.environ.get("HERMES_TEST_PATCHES") or "{}")


class _Patched(Loader):
    def __init__(self, inner: Loader, values: dict[str, Any]) -> None:
        self.inner = inner
        self.values = values

    def create_module(self, spec: ModuleSpec) -> ModuleType | None:
        return self.inner.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self.inner.exec_module(module)
        for name, value in self.values.items():
            if not hasattr(module, name):
                raise AttributeError(f"HERMES_TEST_PATCHES: {module.__name__} has no {name}")
            setattr(module, name, value)


class _Finder(MetaPathFinder):
    def find_spec(self, name: str, path: Any, target: Any = None) -> ModuleSpec | None:
        values = _PATCHES.get(name)
        if values is None:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None and spec.loader is not None:
                spec.loader = _Patched(spec.loader, values)
                return spec
        return None


if _PATCHES:
    sys.meta_path.insert(0, _Finder())


def _write_modules(directory: str) -> None:
    path = os.path.join(directory, f"{os.getpid()}.modules")
    with open(path, "w") as out:
        out.write("\n".join(sorted(sys.modules)))


if os.environ.get("HERMES_TEST_MODULES_AT_EXIT"):
    atexit.register(_write_modules, os.environ["HERMES_TEST_MODULES_AT_EXIT"])
