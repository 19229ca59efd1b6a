"""The secrets the process holds, and the redaction that keeps them out of
every error text and log line.

Two kinds of secret, kept apart:

- the operator's (model and platform keys, server keys, the credentials in
  configured URLs): one process-wide set. Every such secret joins it when it
  comes to exist as a configuration value (the config sections register the
  fields they declare secret, and the credentials in the URLs they hold, as
  they are built), so no code path has to remember to add one;
- a request's (the headers of its ``mcp`` tools, a key in their URLs): a
  set of that request's own, in a context variable set for the request
  (:func:`request_secrets_scope`) that trio copies into every task it
  starts. They are redacted in what the request writes — its log lines,
  its errors, its recording — and nowhere else: a client whose values went
  into the process-wide set could hide paths, key names and error codes in
  everyone's log lines, and grow it without bound.

Two places apply them:

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
import bisect
import contextvars
import logging
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = [
    "MIN_LENGTH",
    "PARTIAL_FROM",
    "REDACTED",
    "Secrets",
    "redact",
    "register_request_secret",
    "register_request_url",
    "register_secret",
    "register_url",
    "request_secrets_scope",
    "shown_url",
    "url_secrets",
]

REDACTED = "<redacted>"
MIN_LENGTH = 8
PARTIAL_FROM = 16
# Past this many entries a text is searched by its MIN_LENGTH-character
# windows (a dictionary lookup each) rather than once per entry: redacting
# a line then costs the same with 10 secrets or 10,000.
_INDEX_FROM = 64


class Secrets:
    """A set of secrets and their forms, ready to redact.

    Adding one costs the same however many there are: whole forms are kept
    by length (longest first, so one that contains another is replaced
    whole), never re-sorted.
    """

    def __init__(self) -> None:
        self._forms: set[str] = set()
        self._by_length: dict[int, list[str]] = {}
        # Distinct lengths, negated so that ascending order is longest first.
        self._lengths: list[int] = []
        # Entries by their first (whole forms, heads) or last (tails)
        # MIN_LENGTH characters.
        self._whole_by_head: dict[str, list[str]] = {}
        self._heads: dict[str, list[str]] = {}
        self._tails: dict[str, list[str]] = {}
        # When each whole form, head and tail came: the indexed search
        # applies them in the same order as the plain one.
        self._rank: dict[str, int] = {}
        self._head_rank: dict[str, int] = {}
        self._tail_rank: dict[str, int] = {}
        self._entries = 0

    def __bool__(self) -> bool:
        return bool(self._forms)

    def __len__(self) -> int:
        """The number of whole forms held."""
        return len(self._forms)

    def add(self, secret: str | None) -> None:
        """Redact ``secret`` from now on; ``None``, empty and short values
        (under :data:`MIN_LENGTH` characters) are ignored."""
        if not secret or len(secret) < MIN_LENGTH or secret in self._forms:
            return
        for form in (secret, urllib.parse.quote(secret, safe="")):
            if form in self._forms:
                continue
            self._forms.add(form)
            size = len(form)
            bucket = self._by_length.get(size)
            if bucket is None:
                bucket = self._by_length[size] = []
                bisect.insort(self._lengths, -size)
            bucket.append(form)
            self._whole_by_head.setdefault(form[:MIN_LENGTH], []).append(form)
            self._rank[form] = self._entries
            self._entries += 1
        if len(secret) >= PARTIAL_FROM:
            head, tail = secret[:MIN_LENGTH], secret[-MIN_LENGTH:]
            # A run with whitespace in it is words, not a quoted key: "correct "
            # must not redact "the correct answer".
            parts = ((head, self._heads, self._head_rank), (tail, self._tails, self._tail_rank))
            for part, index, rank in parts:
                if _has_space(part):
                    continue
                if part not in index:
                    rank[part] = self._entries
                index.setdefault(part, []).append(secret)
                self._entries += 1

    def add_url(self, url: str | None) -> None:
        """Add the credentials ``url`` carries (see :func:`url_secrets`)."""
        for secret in url_secrets(url):
            self.add(secret)

    def redact(self, text: str) -> str:
        """``text`` with every secret held (whole or echoed in part)
        replaced by :data:`REDACTED`."""
        if not self._forms:
            return text
        indexed = self._entries > _INDEX_FROM
        wholes = self._whole_candidates(text) if indexed else self._all_wholes()
        for secret in wholes:
            if secret in text:
                text = text.replace(secret, REDACTED)
        heads = self._found(text, self._heads, self._head_rank) if indexed else list(self._heads)
        for head in heads:
            for secret in self._heads[head]:
                if head in text:
                    text = _cut_heads(text, head, secret)
        tails = self._found(text, self._tails, self._tail_rank) if indexed else list(self._tails)
        for tail in tails:
            for secret in self._tails[tail]:
                if tail in text:
                    text = _cut_tails(text, tail, secret)
        return text

    def _all_wholes(self) -> Iterator[str]:
        for size in self._lengths:
            yield from self._by_length[-size]

    def _whole_candidates(self, text: str) -> list[str]:
        """The whole forms whose first characters occur in ``text``, longest first."""
        index = self._whole_by_head
        found = [secret for head in _windows(text, index) for secret in index[head]]
        found.sort(key=lambda secret: (-len(secret), self._rank[secret]))
        return found

    @staticmethod
    def _found(text: str, index: dict[str, list[str]], rank: dict[str, int]) -> list[str]:
        """The keys of ``index`` that occur in ``text``, in the order they came."""
        return sorted(_windows(text, index), key=rank.__getitem__)


def _windows(text: str, index: dict[str, list[str]]) -> list[str]:
    """The keys of ``index`` that occur in ``text``, in their order there."""
    seen: dict[str, None] = {}
    for start in range(len(text) - MIN_LENGTH + 1):
        window = text[start : start + MIN_LENGTH]
        if window in index:
            seen[window] = None
    return list(seen)


# The operator's secrets: every config value declared secret, platform
# tokens. They are redacted everywhere, for the life of the process.
_GLOBAL = Secrets()
# What the current request brought (the headers of its ``mcp`` tools, the
# credentials in their URLs): redacted in what that request, and the tasks
# it started, write — nobody else's lines.
_REQUEST: contextvars.ContextVar[Secrets | None] = contextvars.ContextVar(
    "hermes_request_secrets", default=None
)


def register_secret(secret: str | None) -> None:
    """Redact ``secret`` from :func:`redact` and from every log record of
    the process from now on: for the operator's own secrets.

    ``None``, empty and short values (under :data:`MIN_LENGTH` characters)
    are ignored; registering the same secret twice costs nothing.
    """
    if not secret or len(secret) < MIN_LENGTH:
        return
    _GLOBAL.add(secret)
    _install_record_factory()


@contextmanager
def request_secrets_scope() -> Iterator[Secrets]:
    """A fresh set of secrets for one request, current for the block and
    for every task started in it (trio copies context variables into child
    tasks, and the set itself is shared, so what a child adds is redacted
    in the parent's lines too)."""
    secrets = Secrets()
    token = _REQUEST.set(secrets)
    try:
        yield secrets
    finally:
        _REQUEST.reset(token)


def _request_set() -> Secrets:
    current = _REQUEST.get()
    if current is None:
        # Outside a request scope (a library user's own call): the secret
        # is this task's and its future children's.
        current = Secrets()
        _REQUEST.set(current)
    return current


def register_request_secret(secret: str | None) -> None:
    """Redact ``secret`` in what the current request writes (its log lines,
    its errors, its recording) and nowhere else: for values a client sends."""
    if not secret or len(secret) < MIN_LENGTH:
        return
    _request_set().add(secret)
    _install_record_factory()


def register_request_url(url: str | None) -> None:
    """:func:`register_request_secret` for the credentials ``url`` carries."""
    for secret in url_secrets(url):
        register_request_secret(secret)


def redact(text: str) -> str:
    """``text`` with every secret of the process, and of the current
    request, (whole or echoed in part) replaced by :data:`REDACTED`."""
    text = _GLOBAL.redact(text)
    request = _REQUEST.get()
    return request.redact(text) if request else text


# Query parameters that carry a credential when a URL has one (Azure's
# ``api-key``, Gemini's ``key``, signed URLs' ``sig``); other parameters
# (``api-version=2024-06-01``) are ordinary text that must stay readable.
_CREDENTIAL_PARAMS = ("key", "token", "secret", "password", "passwd", "sig", "signature", "auth")


def register_url(url: str | None) -> None:
    """Register the credentials a URL carries (see :func:`url_secrets`)."""
    for secret in url_secrets(url):
        register_secret(secret)


def url_secrets(url: str | None) -> list[str]:
    """The credentials a URL carries: its user information (whole, the
    password alone, and the Base64 form ``Basic`` authentication sends; a
    user name without a password only when it is long enough to be a
    token) and the values of query parameters named like a credential
    (``api_key``, ``access_token``, …)."""
    if not url:
        return []
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return []
    found: list[str] = []
    userinfo, at, _ = parts.netloc.rpartition("@")
    # A user name alone (``postgresql://postgres@…``) is no secret, and
    # registered it would redact every "postgres" in every log line; a long
    # one is a token used as the user name (``https://<token>@host``).
    if at and (":" in userinfo or len(userinfo) >= PARTIAL_FROM):
        found += [userinfo, urllib.parse.unquote(userinfo)]
        user, colon, password = userinfo.partition(":")
        if colon:
            found += [password, urllib.parse.unquote(password)]
        # httpx sends user information as ``Authorization: Basic <base64>``,
        # which a server may echo: that form is the same secret.
        plain = f"{urllib.parse.unquote(user)}:{urllib.parse.unquote(password)}"
        for raw in {plain, userinfo}:
            encoded = base64.b64encode(raw.encode()).decode()
            found += [encoded, encoded.rstrip("=")]
    for name, value in urllib.parse.parse_qsl(parts.query, keep_blank_values=False):
        lowered = name.lower()
        if any(word in lowered for word in _CREDENTIAL_PARAMS):
            found.append(value)
    return found


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
    if not _GLOBAL and not _REQUEST.get():
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
