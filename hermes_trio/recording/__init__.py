"""Recording turns: one file per turn with everything needed to replay it
exactly on trio's ``MockClock`` (see :mod:`hermes_trio.testing.replay`).

:mod:`.tape` is the format (sans-IO), :mod:`.schema` the check a file read
back passes before it replays; :mod:`.recorder` the thin trio shell
that fills it as a turn runs, :mod:`.transport` the tap under the model
client that copies its model requests, :mod:`.files` where the files go.
"""

from .files import Recorder
from .recorder import ToolMark, current_tape, note_tool, record_turn
from .tape import RecordingError
from .transport import TapTransport

__all__ = [
    "Recorder",
    "RecordingError",
    "TapTransport",
    "ToolMark",
    "current_tape",
    "note_tool",
    "record_turn",
]
