"""Recording turns: one file per turn with everything needed to replay it
exactly on trio's ``MockClock`` (see :mod:`hermes_trio.testing.replay`).

:mod:`.tape` is the format (sans-IO); :mod:`.recorder` the thin trio shell
that fills it as a turn runs.
"""

from .recorder import Recorder, TapTransport, ToolMark, current_tape, note_tool, record_turn
from .tape import RecordingError

__all__ = [
    "Recorder",
    "RecordingError",
    "TapTransport",
    "ToolMark",
    "current_tape",
    "note_tool",
    "record_turn",
]
