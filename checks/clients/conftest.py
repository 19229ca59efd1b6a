"""pytest configuration for the real-client checks (not part of the project's
test suite: run them with ``.venv/bin/python -m pytest checks/clients``)."""

from __future__ import annotations

import sys
from pathlib import Path

# clientcheck lives beside this file; support.py is importable through the
# project's pythonpath (tests/).
sys.path.insert(0, str(Path(__file__).resolve().parent))
