"""A recorded turn read back from its file (written by ``--record``)."""

from __future__ import annotations

import copy
import os
from dataclasses import dataclass
from typing import Any

from ..config import Config, ConfigError, config_from_sections
from ..recording.document import (
    CancelRecord,
    EventRecord,
    ExchangeRecord,
    RecordedContext,
    RecordedOptions,
    RecordingDocument,
    ToolRecord,
)
from ..recording.files import read_recording
from ..recording.tape import RecordingError, parse, serialize
from ..wire.messages import Message

__all__ = ["Recording"]


@dataclass
class Recording:
    """One turn as recorded: the parsed document (see
    :mod:`hermes_trio.recording.tape` for its layout) and where it came from."""

    document: RecordingDocument
    path: str = "recording"

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Recording:
        """Read a recording, checked whole before anything uses it;
        ``RecordingError`` (a ``ValueError``) names what is wrong with a
        file that is not one, and where."""
        return cls(read_recording(path), str(path))

    @classmethod
    def from_text(cls, text: str, *, path: str = "recording") -> Recording:
        return cls(parse(text, where=path), path)

    def dumps(self) -> str:
        """The recording as a file holds it (e.g. after editing ``document``)."""
        body = self.document.copy()
        body.pop("format", None)
        body.pop("version", None)
        return serialize(body)

    @property
    def exchanges(self) -> list[ExchangeRecord]:
        return list(self.document["exchanges"])

    @property
    def tools(self) -> list[ToolRecord]:
        return list(self.document["tools"])

    @property
    def events(self) -> list[EventRecord]:
        """The recorded events: ``{"at": seconds, "type": name, "data": fields}``."""
        return list(self.document["events"])

    @property
    def cancelled(self) -> CancelRecord | None:
        value = self.document.get("cancelled")
        return value.copy() if isinstance(value, dict) else None

    @property
    def messages(self) -> list[Message]:
        """The conversation the turn was given (a fresh copy)."""
        return copy.deepcopy(list(self.document["turn"].get("messages") or []))

    @property
    def context(self) -> RecordedContext:
        """What the agent had learned of the model's window before the turn."""
        settings = self.document["turn"].get("settings") or {}
        return copy.deepcopy(settings.get("context") or {})

    @property
    def options(self) -> RecordedOptions:
        """``Agent.run_turn`` options the turn ran with (stream, model, …)."""
        return copy.deepcopy(self.document["turn"].get("options") or {})

    def config(self, base_url: str) -> Config:
        """A config that runs the turn as it was run, against ``base_url``."""
        settings = self.document["turn"].get("settings") or {}
        model: dict[str, Any] = dict(settings.get("model") or {})
        if not model.get("name"):
            # The process had picked the server's model before the turn
            # (serve asks at startup): the one its requests named.
            bodies = [e.get("body") for e in self.exchanges if e.get("method") == "POST"]
            named = [b["model"] for b in bodies if isinstance(b, dict) and b.get("model")]
            model["name"] = named[0] if named else None
        # Every model of the chain is the double; no pause of its own before
        # a retry: the double answers it when the recording says.
        model["fallbacks"] = [{**f, "base_url": base_url} for f in model.get("fallbacks") or []]
        model |= {"base_url": base_url, "backoff_base": 0.0, "backoff_max": 0.0}
        try:
            # Judged as config.yaml's settings are (parse checked them too).
            return config_from_sections(
                {
                    "model": model,
                    "agent": settings.get("agent") or {},
                    "compaction": settings.get("compaction") or {},
                }
            )
        except ConfigError as exc:
            raise RecordingError(f"{self.path}: turn.settings.{exc}") from None
