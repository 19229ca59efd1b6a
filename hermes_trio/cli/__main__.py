"""``python -m hermes_trio.cli``: the ``hermes-trio`` command."""

import sys

from .main import main

sys.exit(main())
