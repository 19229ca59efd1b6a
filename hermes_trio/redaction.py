"""One process-wide registry of secrets, and the redaction that keeps them
out of every error text and log line.

Every secret the process holds joins the registry when it comes to exist as
a configuration value (the config sections register the fields they declare
secret, and the credentials in the URLs they hold, as they are built), so
no code path has to remember to add one. Two places apply it:

- :func:`redact`, on text that came from outside (a model server's error
  message that echoes the key it was sent, an httpx error naming a URL
  with a token in it) before it becomes a message anyone sees;
- a log-record factory, installed with the first secret, that redacts
  every record when it is created: every logger (ours, httpx, httpcore,
  hypercorn, any other) and every handler (the CLI's, a test's caplog, a
  library user's own) sees the cleaned text, tracebacks included.

A URL in a message of our own is written with :func:`shown_url`: without
its user name, password and query, which are nobody's business but the
server's.

What counts as a leak:

- the whole secret, or its URL-quoted form (and, for a URL's user
  information, the Base64 form of HTTP ``Basic`` authentication);
- for secrets of at least :data:`PARTIAL_FROM` characters, a truncated
  echo: a run of at least :data:`MIN_LENGTH` characters, without
  whitespace, that is the secret's start (``sk-abc123…``) or end
  (``…wxyz7890``). Servers that refuse a key often quote it that way.

Secrets shorter than :data:`MIN_LENGTH` are not registered: they cannot be
told apart from ordinary text (a test token ``"t"`` would redact every
"t"), and a key that short protects nothing anyway.

This module imports nothing of hermes-trio's, so every layer may use it.
"""

from __future__ import annotations

import base64
import logging
import urllib.parse
from typing import Any

__all__ = [
    "MIN_LENGTH",
    "PARTIAL_FROM",
    "REDACTED",
    "redact",
    "register_secret",
    "register_url",
    "shown_url",
]

REDACTED = "<redacted>"
MIN_LENGTH = 8
PARTIAL_FROM = 16

_SECRETS: set[str] = set()
# Whole secrets, longest first, so one that contains another is replaced whole.
_ordered: list[str] = []
# (head, secret) and (tail, secret) for the partial-echo rule.
_heads: list[tuple[str, str]] = []
_tails: list[tuple[str, str]] = []


def register_secret(secret: str | None) -> None:
    """Redact ``secret`` from :func:`redact` and from log records from now on.

    ``None``, empty and short values (under :data:`MIN_LENGTH` characters)
    are ignored; registering the same secret twice costs nothing.
    """
    if not secret or len(secret) < MIN_LENGTH or secret in _SECRETS:
        return
    forms = {secret, urllib.parse.quote(secret, safe="")}
    _SECRETS.update(forms)
    _ordered[:] = sorted(_SECRETS, key=len, reverse=True)
    if len(secret) >= PARTIAL_FROM:
        head, tail = secret[:MIN_LENGTH], secret[-MIN_LENGTH:]
        # A run with whitespace in it is words, not a quoted key: "correct "
        # must not redact "the correct answer".
        if not _has_space(head):
            _heads.append((head, secret))
        if not _has_space(tail):
            _tails.append((tail, secret))
    _install_record_factory()


def redact(text: str) -> str:
    """``text`` with every registered secret (whole or echoed in part)
    replaced by :data:`REDACTED`."""
    if not _SECRETS:
        return text
    for secret in _ordered:
        if secret in text:
            text = text.replace(secret, REDACTED)
    for head, secret in _heads:
        if head in text:
            text = _cut_heads(text, head, secret)
    for tail, secret in _tails:
        if tail in text:
            text = _cut_tails(text, tail, secret)
    return text


# Query parameters that carry a credential when a URL has one (Azure's
# ``api-key``, Gemini's ``key``, signed URLs' ``sig``); other parameters
# (``api-version=2024-06-01``) are ordinary text that must stay readable.
_CREDENTIAL_PARAMS = ("key", "token", "secret", "password", "passwd", "sig", "signature", "auth")


def register_url(url: str | None) -> None:
    """Register the credentials a URL carries: its user information (whole,
    the password alone, and the Base64 form ``Basic`` authentication
    sends; a user name without a password only when it is long enough to
    be a token) and the values of query parameters named like
    a credential (``api_key``, ``access_token``, …)."""
    if not url:
        return
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return
    userinfo, at, _ = parts.netloc.rpartition("@")
    # A user name alone (``postgresql://postgres@…``) is no secret, and
    # registered it would redact every "postgres" in every log line; a long
    # one is a token used as the user name (``https://<token>@host``).
    if at and (":" in userinfo or len(userinfo) >= PARTIAL_FROM):
        register_secret(userinfo)
        register_secret(urllib.parse.unquote(userinfo))
        user, colon, password = userinfo.partition(":")
        if colon:
            register_secret(password)
            register_secret(urllib.parse.unquote(password))
        # httpx sends user information as ``Authorization: Basic <base64>``,
        # which a server may echo: that form is the same secret.
        plain = f"{urllib.parse.unquote(user)}:{urllib.parse.unquote(password)}"
        for raw in {plain, userinfo}:
            encoded = base64.b64encode(raw.encode()).decode()
            register_secret(encoded)
            register_secret(encoded.rstrip("="))
    for name, value in urllib.parse.parse_qsl(parts.query, keep_blank_values=False):
        lowered = name.lower()
        if any(word in lowered for word in _CREDENTIAL_PARAMS):
            register_secret(value)


def shown_url(url: str) -> str:
    """``url`` as a message may show it: scheme, host, port and path,
    without user information, query or fragment."""
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return redact(url)
    if not parts.scheme or not parts.netloc:
        return redact(url)
    host = parts.netloc.rpartition("@")[2]
    return urllib.parse.urlunsplit((parts.scheme, host, parts.path, "", ""))


def _has_space(text: str) -> bool:
    return any(ch.isspace() for ch in text)


def _cut_heads(text: str, head: str, secret: str) -> str:
    """Replace every run that starts like ``secret`` (at least its head)."""
    out: list[str] = []
    pos = 0
    while (start := text.find(head, pos)) != -1:
        end = start + len(head)
        while end < len(text) and end - start < len(secret) and text[end] == secret[end - start]:
            end += 1
        out.append(text[pos:start])
        out.append(REDACTED)
        pos = end
    out.append(text[pos:])
    return "".join(out)


def _cut_tails(text: str, tail: str, secret: str) -> str:
    """Replace every run that ends like ``secret`` (at least its tail)."""
    out: list[str] = []
    pos = 0
    while (found := text.find(tail, pos)) != -1:
        end = found + len(tail)
        start = found
        # Extend to the left while the text keeps matching the secret's end.
        matched = len(tail)
        while start > pos and matched < len(secret) and text[start - 1] == secret[-matched - 1]:
            start -= 1
            matched += 1
        out.append(text[pos:start])
        out.append(REDACTED)
        pos = end
    out.append(text[pos:])
    return "".join(out)


def _clean(record: logging.LogRecord) -> None:
    if not _SECRETS:
        return
    try:
        message = record.getMessage()
    except Exception:
        # A record whose arguments do not format is the handler's problem
        # to report; it prints no secret of ours.
        return
    cleaned = redact(message)
    if cleaned != message:
        record.msg = cleaned
        record.args = None
    if record.exc_info and not record.exc_text:
        # Formatters use a cached exc_text when there is one: format the
        # traceback now, cleaned, so no handler formats the raw one.
        record.exc_text = redact(logging.Formatter().formatException(record.exc_info))
    elif record.exc_text:
        record.exc_text = redact(record.exc_text)
    if record.stack_info:
        record.stack_info = redact(record.stack_info)


_installed = False


def _install_record_factory() -> None:
    global _installed
    if _installed:
        return
    _installed = True
    previous = logging.getLogRecordFactory()

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = previous(*args, **kwargs)
        _clean(record)
        return record

    logging.setLogRecordFactory(factory)
