"""One way to the model server, and no third-party private name unguarded.

``llm/`` is the only code that talks to the model server: everything else
(the plain relay, ``doctor``, ``init``, discovery, the start-up probe) goes
through the model client. The modules that may import httpx at all are
listed below with the reason; a new import anywhere else fails here.

Every name below a third-party package's public API that the package uses
(a private module, a private attribute of its classes, an override of a
private method) is listed in :data:`KNOWN_PRIVATE` with the reliance test
that checks it and the dependency pyproject.toml caps for it.
"""

from __future__ import annotations

import ast
import functools
import importlib
import inspect
import re
import sys
from pathlib import Path

import httpx
import pytest

import hermes_trio
from hermes_trio.llm.pool import PooledTransport

PACKAGE = Path(hermes_trio.__file__).resolve().parent
ROOT = PACKAGE.parent
PYPROJECT = ROOT / "pyproject.toml"

# Module (or package folder) → why it may import httpx (or httpcore).
HTTPX_ALLOWED = {
    "llm/": "the model client: the one way to the model server",
    "testing/": "the test kit's model double and fake platforms are httpx transports",
    "platforms/": "the chat platforms' own APIs (Telegram, Slack, …), not the model server",
    "recording/transport.py": "the tap: an httpx transport under the model client's client",
    "gateway/runtime.py": "opens the client the platform adapters share",
    "cli/gateway.py": "opens the client the platform adapters share",
    "cli/init.py": "asks Telegram whether a bot token works (the model server: llm.list_models)",
}
HTTP_CLIENTS = {"httpx", "httpcore"}


def _modules() -> list[tuple[str, ast.Module]]:
    return [
        (path.relative_to(PACKAGE).as_posix(), ast.parse(path.read_text(), str(path)))
        for path in sorted(PACKAGE.rglob("*.py"))
    ]


def _type_checking_only(tree: ast.Module) -> set[int]:
    """Line numbers of imports under ``if TYPE_CHECKING:`` (annotations talk to nobody)."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and ast.unparse(node.test).endswith("TYPE_CHECKING"):
            for inner in node.body:
                lines.update(n.lineno for n in ast.walk(inner) if hasattr(n, "lineno"))
    return lines


def _imported(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
        return [node.module]
    return []


def test_only_the_listed_modules_import_httpx() -> None:
    offenders = []
    for name, tree in _modules():
        if any(name.startswith(allowed) for allowed in HTTPX_ALLOWED):
            continue
        typing_only = _type_checking_only(tree)
        for node in ast.walk(tree):
            for module in _imported(node):
                if module.split(".")[0] in HTTP_CLIENTS and node.lineno not in typing_only:
                    offenders.append(f"hermes_trio/{name}:{node.lineno} imports {module}")
    assert not offenders, (
        "only llm/ talks to the model server (use ModelClient.relay/models, "
        "llm.list_models); other HTTP belongs to a module in HTTPX_ALLOWED:\n"
        + "\n".join(offenders)
    )


def test_the_pool_reaches_httpx_through_its_public_transport_api() -> None:
    # It was httpx.AsyncHTTPTransport with its private ``_pool`` overwritten.
    assert not issubclass(PooledTransport, httpx.AsyncHTTPTransport)
    assert issubclass(PooledTransport, httpx.AsyncBaseTransport)
    assert "handle_async_request" in vars(PooledTransport)


# Third-party private name → (the reliance test that checks it, the
# distribution pyproject.toml caps for it).
KNOWN_PRIVATE = {
    "httpcore._backends.trio": ("llm/test_httpcore_reliance.py", "httpcore"),
    "httpcore._backends.trio.TrioStream._stream": ("llm/test_httpcore_reliance.py", "httpcore"),
    "mcp.client.stdio._get_executable_command": ("mcp/test_mcp_stdio_reliance.py", "mcp"),
    "mcp.client.stdio._create_platform_compatible_process": (
        "mcp/test_mcp_stdio_reliance.py",
        "mcp",
    ),
    "mcp.client.stdio._parse_line": ("mcp/test_mcp_stdio_reliance.py", "mcp"),
    "mcp.client.stdio._drain_stdout": ("mcp/test_mcp_stdio_reliance.py", "mcp"),
    "mcp.client.stdio._stop_server_process": ("mcp/test_mcp_stdio_reliance.py", "mcp"),
    "mcp.client.stdio._aclose_all": ("mcp/test_mcp_stdio_reliance.py", "mcp"),
    "mcp.client.stdio._WRITER_FLUSH_TIMEOUT": ("mcp/test_mcp_stdio_reliance.py", "mcp"),
    "hypercorn.protocol.h11.H11Protocol._send_error_response": (
        "listener/test_hypercorn_reliance.py",
        "hypercorn",
    ),
    "hypercorn.protocol.h11.H11Protocol._check_protocol": (
        "listener/test_hypercorn_reliance.py",
        "hypercorn",
    ),
    "hypercorn.protocol.h11.H11Protocol._send_h11_event": (
        "listener/test_hypercorn_reliance.py",
        "hypercorn",
    ),
}


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _third_party(module: str) -> bool:
    root = module.split(".")[0]
    return root != "hermes_trio" and root not in sys.stdlib_module_names


@functools.cache
def _source(cls: type) -> str:
    """The source of ``cls``'s own functions (the class itself may not be
    findable: httpx gives its public classes ``__module__ = "httpx"``)."""
    parts = []
    for value in vars(cls).values():
        function = getattr(value, "fget", value)
        if inspect.isfunction(function):
            try:
                parts.append(inspect.getsource(function))
            except (OSError, TypeError):
                continue
    return "\n".join(parts)


def _owner(cls: type, name: str, *, itself: bool = False) -> type | None:
    """The third-party class in ``cls``'s ancestry (``itself`` included or
    not) that has ``name`` (as a class attribute, or set on ``self`` in its
    source)."""
    for base in cls.__mro__[0 if itself else 1 :]:
        if not _third_party(base.__module__):
            continue
        if name in vars(base) or re.search(rf"self\.{name}\b", _source(base)):
            return base
    return None


def _names_of(tree: ast.Module) -> dict[str, str]:
    """Local name → the third-party module or class it was imported as."""
    bound: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if _third_party(alias.name):
                    bound[alias.asname or alias.name.split(".")[0]] = (
                        alias.name if alias.asname else alias.name.split(".")[0]
                    )
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if _third_party(node.module):
                for alias in node.names:
                    bound[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return bound


def _resolve(dotted: str) -> object:
    module, _, attr = dotted.rpartition(".")
    try:
        return getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError, ValueError):
        return importlib.import_module(dotted)


def _private_uses(name: str, tree: ast.Module) -> set[str]:
    """The third-party private names module ``name`` uses."""
    bound = _names_of(tree)
    found: set[str] = set()
    module_name = "hermes_trio." + name.removesuffix(".py").replace("/", ".").removesuffix(
        ".__init__"
    )
    # Private names this module defines: its own, whatever the object.
    ours = {
        n.attr if isinstance(n, ast.Attribute) else n.name
        for n in ast.walk(tree)
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
        or (isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store))
    }
    for node in ast.walk(tree):
        for module in _imported(node):
            if _third_party(module) and any(_private(part) for part in module.split(".")):
                found.add(module)
        if isinstance(node, ast.Attribute) and _private(node.attr):
            base = node.value
            if isinstance(base, ast.Name) and base.id in bound:
                owner = _resolve(bound[base.id])
                if isinstance(owner, type) or inspect.ismodule(owner):
                    # module._x, Class._x
                    found.add(f"{bound[base.id]}.{node.attr}")
            elif isinstance(base, ast.Name) and node.attr not in ours:
                # x._y, x of a class imported by name (stream._stream).
                for dotted in bound.values():
                    owner = _resolve(dotted)
                    if isinstance(owner, type) and _owner(owner, node.attr, itself=True):
                        found.add(f"{dotted}.{node.attr}")
        if isinstance(node, ast.ClassDef):
            cls = getattr(importlib.import_module(module_name), node.name, None)
            if not isinstance(cls, type):
                continue
            for inner in ast.walk(node):
                names = []
                if isinstance(inner, ast.FunctionDef | ast.AsyncFunctionDef):
                    names.append(inner.name)
                if isinstance(inner, ast.Attribute) and isinstance(inner.value, ast.Name):
                    if inner.value.id in ("self", "cls"):
                        names.append(inner.attr)
                for attr in filter(_private, names):
                    owner = _owner(cls, attr)
                    if owner is not None:
                        found.add(f"{owner.__module__}.{owner.__qualname__}.{attr}")
    return found


def test_every_third_party_private_name_is_known_capped_and_guarded() -> None:
    used: dict[str, set[str]] = {}
    for name, tree in _modules():
        for private in _private_uses(name, tree):
            used.setdefault(private, set()).add(name)
    unknown = {name: sorted(where) for name, where in used.items() if name not in KNOWN_PRIVATE}
    assert not unknown, (
        f"third-party private names with no reliance test: {unknown}; use the public "
        "API, or add the name to KNOWN_PRIVATE with a test that checks it and a cap"
    )
    pyproject = PYPROJECT.read_text()
    for private in used:
        test, distribution = KNOWN_PRIVATE[private]
        attr = private.rpartition(".")[2]
        guard = (Path(__file__).parents[1] / test).read_text()
        guarded = attr in guard or private in guard
        if not guarded and "mcp" in private:
            guarded = "SDK_INTERNALS" in guard
        if not guarded and "hypercorn" in private:
            guarded = "HYPERCORN_INTERNALS" in guard
        assert guarded, f"{test} does not check {private}"
        cap = re.search(rf'"{distribution}(\[[^\]]*\])?>=[^"]*<\s*\d', pyproject)
        assert cap, f"pyproject.toml does not cap {distribution}, whose {private} we use"


@pytest.mark.parametrize("private", sorted(KNOWN_PRIVATE))
def test_each_known_private_name_is_still_there(private: str) -> None:
    # A stale entry hides nothing, but says something we no longer do.
    target, _, attr = private.rpartition(".")
    try:
        owner = _resolve(target)
    except ImportError:
        pytest.fail(f"{target} is gone")
    if inspect.ismodule(owner) and not hasattr(owner, attr):
        importlib.import_module(private)
        return
    assert hasattr(owner, attr) or (
        isinstance(owner, type) and re.search(rf"self\.{attr}\b", inspect.getsource(owner))
    ), f"{private} is gone"


def test_nothing_assigns_a_private_attribute_of_a_third_party_object() -> None:
    assigned = []
    for name, tree in _modules():
        for private in _private_uses(name, tree):
            attr = private.rpartition(".")[2]
            for node in ast.walk(tree):
                targets = node.targets if isinstance(node, ast.Assign) else []
                if isinstance(node, ast.AnnAssign | ast.AugAssign):
                    targets = [node.target]
                for target in targets:
                    if isinstance(target, ast.Attribute) and target.attr == attr:
                        assigned.append(f"hermes_trio/{name}:{node.lineno} assigns {private}")
    assert not assigned, "\n".join(assigned)
