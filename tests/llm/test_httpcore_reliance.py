"""The model pool's reliance on httpcore's private trio stream, checked.

``llm/pool.py`` subclasses ``httpcore._backends.trio.TrioStream`` so that a
read without a timeout skips the cancel scope httpcore opens per read. An
httpcore release that renames the class, its ``_stream`` attribute or the
read's parameters would break the model client; pyproject.toml caps
httpcore below its next minor version, and this test says what to re-check
before the cap is lifted.
"""

from __future__ import annotations

import inspect
import re
from importlib.metadata import version
from pathlib import Path

import httpcore
import pytest
import trio
import trio.testing

from hermes_trio.llm.pool import _UnboundedReads

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


def test_the_private_trio_stream_is_there_as_the_pool_uses_it() -> None:
    try:
        from httpcore._backends.trio import TrioStream
    except ImportError as error:  # pragma: no cover - only on a new httpcore
        pytest.fail(f"httpcore {version('httpcore')} has no _backends.trio.TrioStream ({error})")
    assert list(inspect.signature(TrioStream.__init__).parameters) == ["self", "stream"]
    assert list(inspect.signature(TrioStream.read).parameters) == ["self", "max_bytes", "timeout"]
    source = inspect.getsource(TrioStream)
    assert "self._stream = stream" in source, "TrioStream no longer keeps its stream in _stream"
    assert issubclass(_UnboundedReads, TrioStream)
    assert issubclass(httpcore.TrioBackend, httpcore.AsyncNetworkBackend)


def test_httpcore_is_capped_below_its_next_minor_version() -> None:
    cap = re.search(r'"httpcore>=[^"]*<(\d+)\.(\d+)"', PYPROJECT.read_text())
    assert cap, "pyproject.toml must cap httpcore (llm/pool.py relies on its internals)"
    installed = tuple(int(p) for p in version("httpcore").split(".")[:2])
    assert installed < (int(cap[1]), int(cap[2]))


async def test_a_read_without_timeout_maps_a_broken_stream_as_httpcore_does() -> None:
    left, right = trio.testing.memory_stream_pair()
    stream = _UnboundedReads(left)
    await right.send_all(b"abc")
    assert await stream.read(10) == b"abc"
    await left.aclose()
    with pytest.raises(httpcore.ReadError):
        await stream.read(10)
