"""API keys: the single ``api_server.key`` (named ``default``) and named
keys with limits (``api_server.keys``, ``api_server.keys_file``).

:class:`Budget` is the per-key arithmetic, pure (the caller gives the
time): requests and completion tokens over a sliding minute. A request is
refused when the key already spent its minute's budget. :class:`KeyRing`
finds a request's key (every known key compared in constant time, all of
them, whatever matched) and holds each key's budget and its work in flight.

``max_concurrent`` counts work, not requests: a request that starts a turn
or a relay takes a :class:`Reservation` (:meth:`KeyRing.reserve`), and the
work keeps it until the work ends, however long that outlives the HTTP
reply (a background response, a stream whose client left); the work's end
gives it back with the tokens it spent, which are charged then (only then
are they known), so one turn may take a key over its token budget, and the
next request waits until enough of the minute has passed. Reading, polling
or cancelling a response starts no work and takes no place. Limits are per
process: under ``serve --workers N`` each worker counts its own.
"""

from __future__ import annotations

import hmac
import math
from collections import deque
from contextvars import ContextVar
from dataclasses import dataclass, field

from ...config import ApiKeyConfig, ApiServerConfig, ConfigError, load_keys_file

__all__ = [
    "WINDOW",
    "Budget",
    "KeyRing",
    "NamedKey",
    "Refusal",
    "Reservation",
    "current_key",
    "keys_of",
]

WINDOW = 60.0
_SLACK = 1e-6


@dataclass(frozen=True)
class NamedKey:
    name: str
    secret: bytes
    max_concurrent: int | None = None
    requests_per_minute: int | None = None
    tokens_per_minute: int | None = None


@dataclass(frozen=True)
class Refusal:
    code: str
    message: str
    retry_after: float


@dataclass
class Budget:
    requests_per_minute: int | None
    tokens_per_minute: int | None
    _requests: deque[float] = field(default_factory=deque)
    _tokens: deque[tuple[float, int]] = field(default_factory=deque)

    def _forget(self, now: float) -> None:
        # A microsecond's slack: a client that waits exactly the Retry-After
        # it was given must not be refused for a float's last digit.
        edge = now + _SLACK - WINDOW
        while self._requests and self._requests[0] <= edge:
            self._requests.popleft()
        while self._tokens and self._tokens[0][0] <= edge:
            self._tokens.popleft()

    def refusal(self, now: float) -> Refusal | None:
        """Why a request at ``now`` must wait, and for how long; None: go."""
        self._forget(now)
        rpm = self.requests_per_minute
        if rpm is not None and len(self._requests) >= rpm:
            wait = self._requests[len(self._requests) - rpm] + WINDOW - now
            return Refusal(
                "requests_per_minute_exceeded",
                f"this key's limit of {rpm} requests per minute is reached",
                wait,
            )
        tpm = self.tokens_per_minute
        if tpm is not None:
            spent = sum(n for _, n in self._tokens)
            if spent >= tpm:
                # Until enough of the oldest charges leave the window.
                for at, n in self._tokens:
                    spent -= n
                    if spent < tpm:
                        return Refusal(
                            "tokens_per_minute_exceeded",
                            f"this key's limit of {tpm} tokens per minute is reached",
                            at + WINDOW - now,
                        )
        return None

    def admit(self, now: float) -> None:
        self._requests.append(now)

    def charge(self, now: float, tokens: int) -> None:
        if tokens > 0:
            self._tokens.append((now, tokens))


def keys_of(settings: ApiServerConfig) -> list[NamedKey]:
    """Every key the settings name; raises ``ConfigError`` for a bad keys
    file, and for a name or a key given twice across ``api_server.key``
    (named ``default``), ``api_server.keys`` and the keys file: a name is
    how the log and the limits tell keys apart, so two keys under one name
    would share one budget and one line."""
    listed: list[tuple[ApiKeyConfig, str]] = [(k, "api_server.keys") for k in settings.keys]
    if settings.keys_file:
        where = f"api_server.keys_file {settings.keys_file}"
        listed += [(k, where) for k in load_keys_file(settings.keys_file)]
    names: dict[str, str] = {"default": "api_server.key"} if settings.key else {}
    secrets: dict[str, str] = {settings.key: "api_server.key"} if settings.key else {}
    for entry, where in listed:
        if entry.name in names:
            raise ConfigError(
                f"{where}: the key name {entry.name!r} is also used by {names[entry.name]} "
                "(each key needs a name of its own)"
            )
        if entry.key and entry.key in secrets:
            raise ConfigError(
                f"{where}: the key named {entry.name!r} is also listed in {secrets[entry.key]}"
            )
        names[entry.name] = where
        secrets[entry.key or ""] = f"{where} (as {entry.name!r})"
    keys = [
        NamedKey(
            k.name,
            (k.key or "").encode(),
            k.max_concurrent,
            k.requests_per_minute,
            k.tokens_per_minute,
        )
        for k, _ in listed
    ]
    if settings.key:
        keys.insert(0, NamedKey("default", settings.key.encode()))
    return keys


class KeyRing:
    def __init__(self, keys: list[NamedKey]) -> None:
        self.keys = keys
        self.budgets: dict[str, Budget] = {}
        self.in_flight: dict[str, int] = {}
        self.replace(keys)

    @property
    def required(self) -> bool:
        return bool(self.keys)

    def replace(self, keys: list[NamedKey]) -> None:
        """New keys (a reload); a key kept by name keeps what it spent."""
        self.keys = keys
        old = self.budgets
        self.budgets = {}
        for key in keys:
            budget = old.get(key.name) or Budget(key.requests_per_minute, key.tokens_per_minute)
            budget.requests_per_minute = key.requests_per_minute
            budget.tokens_per_minute = key.tokens_per_minute
            self.budgets[key.name] = budget

    def find(self, token: str) -> NamedKey | None:
        given = token.encode()
        found = None
        for key in self.keys:
            # Every key is compared, whichever matched: the time says nothing.
            if hmac.compare_digest(given, key.secret):
                found = key
        return found

    def admit(self, key: NamedKey, now: float) -> Refusal | None:
        """Count a request of ``key`` in, or say why it must wait."""
        budget = self.budgets[key.name]
        refusal = budget.refusal(now)
        if refusal is not None:
            return refusal
        budget.admit(now)
        return None

    def reserve(self, key: NamedKey) -> Reservation | Refusal:
        """A place among ``key``'s work in flight, or why there is none."""
        busy = self.in_flight.get(key.name, 0)
        if key.max_concurrent is not None and busy >= key.max_concurrent:
            return Refusal(
                "key_concurrency_exceeded",
                f"this key already has {busy} requests at work (its limit of "
                f"{key.max_concurrent}); retry when one has ended",
                1.0,
            )
        self.in_flight[key.name] = busy + 1
        return Reservation(self, key.name)

    def _end(self, name: str, now: float, tokens: int) -> None:
        self.in_flight[name] = max(0, self.in_flight.get(name, 0) - 1)
        budget = self.budgets.get(name)
        if budget is not None:
            budget.charge(now, tokens)


@dataclass(eq=False)
class Reservation:
    """One piece of work's place in its key's concurrency; the work gives
    it back once, as it ends, with the completion tokens it spent."""

    ring: KeyRing
    name: str
    released: bool = False

    def release(self, now: float, tokens: int) -> None:
        """Give the place back and charge ``tokens`` at ``now``; only the
        first call counts."""
        if self.released:
            return
        self.released = True
        self.ring._end(self.name, now, tokens)


current_key: ContextVar[tuple[KeyRing, NamedKey] | None] = ContextVar(
    "hermes_request_key", default=None
)
"""The key the current request was admitted with (set by the app's key
check): the work the request starts reserves its place under it."""


def retry_after_header(seconds: float) -> str:
    return str(max(1, math.ceil(seconds)))
