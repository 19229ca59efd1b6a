""".env files: ``KEY=VALUE`` lines as python-dotenv reads them.

The loader (:func:`hermes_trio.config.load_config`) reads the settings it
knows from a ``.env`` file in the working directory and in the data
directory, under the real environment; nothing here touches ``os.environ``.
Values are taken as written (no ``${VAR}`` expansion: a key with a ``$`` in
it stays the key). A line python-dotenv cannot parse is skipped with one
warning naming the file and the line, as python-dotenv itself skips it.
"""

from __future__ import annotations

import io
import logging
from pathlib import Path

# A public module of python-dotenv, though not in its __all__: its
# ``dotenv_values`` warns of a bad line without naming the file.
# tests/dotenv_files/test_dotenv_reliance.py checks what is used here.
from dotenv.parser import parse_stream

__all__ = ["DOTENV_NAME", "EnvFileError", "parse_env_text", "read_env_file"]

DOTENV_NAME = ".env"

log = logging.getLogger(__name__)


class EnvFileError(Exception):
    """A ``.env`` file exists but cannot be read; ``str()`` names it and why."""


def parse_env_text(text: str, where: str) -> dict[str, str]:
    """The ``KEY=VALUE`` pairs of ``text`` (later lines win); ``where``
    names it in the warning for each line that is not one. A bare ``KEY``
    (no ``=``) sets nothing."""
    values: dict[str, str] = {}
    for binding in parse_stream(io.StringIO(text)):
        if binding.error:
            log.warning("%s line %d: not a KEY=VALUE line, ignored", where, binding.original.line)
        elif binding.key is not None and binding.value is not None:
            values[binding.key] = binding.value
    return values


def read_env_file(path: Path) -> dict[str, str] | None:
    """The pairs of the ``.env`` file at ``path``; None when there is none.
    Raises ``EnvFileError`` when it is there but unreadable."""
    if path.is_dir():
        return None  # a virtual environment named .env, as many are
    try:
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise EnvFileError(f"{path.absolute()}: cannot be read ({why})") from None
    return parse_env_text(text, str(path.absolute()))
