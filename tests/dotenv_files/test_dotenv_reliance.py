"""The .env reader's reliance on python-dotenv's parser module, checked.

``dotenv_files.py`` reads ``dotenv.parser.parse_stream`` (a public module,
though not in the package's ``__all__``) so that a bad line can be named
with its file. A python-dotenv release that moves it or changes its
``Binding`` would break reading ``.env``; pyproject.toml caps python-dotenv
below its next major version, and this test says what to re-check before
the cap is lifted.
"""

from __future__ import annotations

import io
import re
from importlib.metadata import version
from pathlib import Path

from dotenv.parser import parse_stream

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


def test_the_parser_gives_bindings_with_their_line_and_error() -> None:
    bindings = list(parse_stream(io.StringIO('A=1\nnot one\nexport B="x y" # c\nC\n')))
    seen = [(b.key, b.value, b.original.line, b.error) for b in bindings]
    assert seen == [
        ("A", "1", 1, False),
        (None, None, 2, True),
        ("B", "x y", 3, False),
        ("C", None, 4, False),
    ]


def test_python_dotenv_is_capped_below_its_next_major_version() -> None:
    cap = re.search(r'"python-dotenv>=[^"]*<(\d+)"', PYPROJECT.read_text())
    assert cap, "pyproject.toml must cap python-dotenv (dotenv_files.py uses its parser)"
    assert int(version("python-dotenv").split(".")[0]) < int(cap[1])
