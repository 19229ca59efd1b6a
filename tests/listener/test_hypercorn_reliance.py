"""The listener's reliance on hypercorn's internals, checked by name.

``listener/listener.py`` subclasses hypercorn's ``H11Protocol`` and overrides
private methods; a hypercorn release that renames one would leave our
override silently uncalled (plain-text errors, an h2c switch). pyproject.toml
caps hypercorn below its next minor version; this test says what to re-check
before that cap is lifted.
"""

from __future__ import annotations

import importlib
import inspect
import re
from importlib.metadata import version
from pathlib import Path

import pytest
from hypercorn.protocol.h11 import H11Protocol
from hypercorn.trio.worker_context import WorkerContext

from hermes_trio.listener.listener import _H11, HYPERCORN_INTERNALS

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


def resolve(dotted: str) -> object:
    module, _, name = dotted.rpartition(".")
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as error:
        pytest.fail(
            f"hypercorn {version('hypercorn')} has no {dotted}, which "
            f"hermes_trio/listener/listener.py relies on ({error})"
        )


@pytest.mark.parametrize("owner", sorted(HYPERCORN_INTERNALS))
def test_every_private_name_the_listener_relies_on_is_there(owner: str) -> None:
    cls = resolve(owner)
    missing = [name for name in HYPERCORN_INTERNALS[owner] if not hasattr(cls, name)]
    assert not missing, (
        f"hypercorn {version('hypercorn')}: {owner} has no {', '.join(missing)}; "
        "hermes_trio/listener/listener.py relies on it (see HYPERCORN_INTERNALS)"
    )


def test_hypercorn_still_calls_what_the_listener_overrides() -> None:
    source = inspect.getsource(H11Protocol._handle_events)
    for name in ("_send_error_response", "_check_protocol"):
        assert f"self.{name}(" in source, (
            f"hypercorn {version('hypercorn')} no longer calls H11Protocol.{name} from "
            "_handle_events: the override in hermes_trio/listener/listener.py is dead code"
        )
        ours = inspect.signature(getattr(_H11, name))
        theirs = inspect.signature(getattr(H11Protocol, name))
        assert list(ours.parameters) == list(theirs.parameters), (
            f"H11Protocol.{name}{theirs} no longer matches our override {ours}"
        )


def test_the_listener_builds_h11_protocol_with_the_arguments_it_takes() -> None:
    params = list(inspect.signature(H11Protocol.__init__).parameters)[1:10]
    assert params == [
        "app",
        "config",
        "context",
        "task_group",
        "connection_state",
        "ssl",
        "client",
        "server",
        "send",
    ], f"H11Protocol.__init__ now takes {params}; _Connection.run passes them by position"


def test_the_worker_context_still_has_the_event_shutdown_sets() -> None:
    context = WorkerContext(None)
    assert inspect.iscoroutinefunction(getattr(context.terminated, "set", None)), (
        f"hypercorn {version('hypercorn')}: WorkerContext.terminated.set, which "
        "serve_hypercorn awaits at shutdown, is gone or no longer a coroutine"
    )


def test_hypercorn_is_capped_below_its_next_minor_version() -> None:
    line = re.search(r'"hypercorn([^"]*)"', PYPROJECT.read_text())
    assert line is not None, "pyproject.toml does not name hypercorn"
    cap = re.search(r"<\s*(\d+)\.(\d+)", line.group(1))
    assert cap is not None, f"hypercorn{line.group(1)}: no upper bound on private API"
    installed = tuple(int(part) for part in version("hypercorn").split(".")[:2])
    assert installed < (int(cap.group(1)), int(cap.group(2))), (
        f"hypercorn {version('hypercorn')} is installed past the cap {line.group(1)}"
    )
