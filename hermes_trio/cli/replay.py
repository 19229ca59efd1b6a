"""``hermes-trio replay FILE``: run a recorded turn again on trio's mock
clock, print its timeline, and say whether it did what the recording says."""

from __future__ import annotations

import argparse
import sys
import time

from ..config import Config
from ..recording.files import read_recording
from ..recording.tape import RecordingError

__all__ = ["run_replay"]


def run_replay(config: Config, args: argparse.Namespace) -> int:
    """0: the replayed events of every file match the recorded ones (text,
    tool calls, times to the millisecond); 1: one differs (the first
    difference is named); 2: a file is not a recording (one line naming
    where it is wrong)."""
    worst = 0
    for path in args.files:
        worst = max(worst, _replay_one(path, several=len(args.files) > 1))
    return worst


def _replay_one(path: str, *, several: bool) -> int:
    try:
        # The whole file is checked before anything runs.
        document = read_recording(path)
    except (OSError, RecordingError) as exc:
        print(f"hermes-trio replay: {exc}", file=sys.stderr)
        return 2
    # The agent and the kit cost most of a second to import: only for a
    # file that is a recording.
    from ..testing.replay import replay
    from ..testing.replay_data import Recording

    began = time.monotonic()
    if several:
        print(f"== {path}")
    try:
        result = replay(Recording(document, path))
    except RecordingError as exc:
        print(f"hermes-trio replay: {exc}", file=sys.stderr)
        return 2
    took = time.monotonic() - began
    for line in result.timeline():
        print(line)
    difference = result.difference
    if difference is not None:
        print(f"hermes-trio replay: {path}: {difference}", file=sys.stderr)
        return 1
    print(f"replay matches the recording ({len(result.events)} events, {took:.3f} s)")
    return 0
