"""SIGHUP's key reload (``reload_keys_on_sighup``), in process."""

from __future__ import annotations

import json
import logging
import signal
from pathlib import Path

import trio

from hermes_trio.cli.serve_shared import reload_keys_on_sighup
from hermes_trio.config import load_config
from hermes_trio.server.admission.keys import KeyRing, keys_of


class _Said(logging.Handler):
    """The reload's verdict, awaited: its one log line."""

    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []
        self.said = trio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())
        self.said.set()


async def test_a_reload_that_would_leave_a_public_server_keyless_keeps_the_keys(
    tmp_path: Path,
) -> None:
    # The start refuses a non-loopback host without a key; a reload that
    # empties the keys file must not get round it.
    keys = tmp_path / "keys.yaml"
    keys.write_text(json.dumps([{"name": "bob", "key": "sk-bob-good-key"}]))
    source = tmp_path / "config.yaml"
    source.write_text(f"api_server:\n  host: 0.0.0.0\n  keys_file: '{keys}'\n")
    config = load_config(source, env={})
    ring = KeyRing(keys_of(config.api_server))
    keys.write_text("[]\n")
    said = _Said()
    logger = logging.getLogger("hermes_trio.server")
    logger.addHandler(said)
    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(reload_keys_on_sighup, config, ring)
            signal.raise_signal(signal.SIGHUP)
            with trio.fail_after(5):
                await said.said.wait()
            nursery.cancel_scope.cancel()
    finally:
        logger.removeHandler(said)
    assert [k.name for k in ring.keys] == ["bob"]
    (line,) = said.lines
    assert line.startswith("API keys not reloaded, the old ones stay: ")
    assert "api_server.host is 0.0.0.0" in line
