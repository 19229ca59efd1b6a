"""A request's secrets are that request's (:mod:`hermes_trio.redaction`):
redacted in its own lines and its children's, never in another request's,
never added to the process-wide set; and adding many costs linear time,
after which a line is still redacted in far less than a millisecond's work
per secret."""

from __future__ import annotations

import logging
import string

import pytest
import trio
from hypothesis import given
from hypothesis import strategies as st

from hermes_trio import redaction
from hermes_trio.redaction import (
    REDACTED,
    Secrets,
    redact,
    register_request_secret,
    request_secrets_scope,
)
from hermes_trio.server.responses.request import parse_responses_request


async def test_a_requests_secret_is_redacted_in_its_tasks_and_nowhere_else(
    caplog: pytest.LogCaptureFixture,
) -> None:
    log = logging.getLogger("hermes_trio.test")
    seen: dict[str, str] = {}

    async def request(name: str, value: str | None) -> None:
        with request_secrets_scope():
            if value is not None:
                register_request_secret(value)

            async def child() -> None:
                await trio.lowlevel.checkpoint()
                seen[name] = redact("GET /v1/approvals/x key=alice-the-admin")
                log.warning("%s: GET /v1/approvals/x key=alice-the-admin", name)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(child)

    with caplog.at_level(logging.WARNING, logger="hermes_trio.test"):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(request, "first", "/v1/approvals/")
            nursery.start_soon(request, "second", None)
        await request("third", " key=alice")
    assert seen["first"] == f"GET {REDACTED}x key=alice-the-admin"
    assert seen["second"] == "GET /v1/approvals/x key=alice-the-admin"
    assert seen["third"] == f"GET /v1/approvals/x{REDACTED}-the-admin"
    lines = {r.getMessage().split(":")[0]: r.getMessage() for r in caplog.records}
    assert lines["second"] == "second: GET /v1/approvals/x key=alice-the-admin"
    assert REDACTED in lines["first"] and REDACTED in lines["third"]
    # Outside every request, nothing of theirs is redacted.
    assert redact("/v1/approvals/ key=alice") == "/v1/approvals/ key=alice"


def test_an_mcp_tools_headers_stay_out_of_the_process_set() -> None:
    before = len(redaction._GLOBAL)
    value = "invalid_api_key-header"
    with request_secrets_scope():
        parse_responses_request(
            {
                "model": "m",
                "input": "hi",
                "tools": [
                    {
                        "type": "mcp",
                        "server_label": "x",
                        "server_url": "http://127.0.0.1:9/mcp?token=a-query-token-123456",
                        "headers": {"X-A": value},
                    }
                ],
            },
            mcp_allowed_urls=["http://127.0.0.1:9"],
        )
        assert redact(f"error={value}") == f"error={REDACTED}"
        assert redact("a-query-token-123456") == REDACTED
    assert len(redaction._GLOBAL) == before
    assert redact(f"error={value}") == f"error={value}"


class CountedLen(str):
    """A string that counts how often its length is asked (a sort by length asks it)."""

    asked = 0

    def __len__(self) -> int:
        CountedLen.asked += 1
        return super().__len__()


def test_adding_secrets_is_linear_not_a_sort_per_secret() -> None:
    secrets = Secrets()
    count = 4000
    CountedLen.asked = 0
    for i in range(count):
        secrets.add(CountedLen(f"value-{i:06d}-of-a-client"))
    # Sorting everything on every insert asked about 8 million times.
    assert CountedLen.asked < 10 * count
    assert len(secrets) == count


def test_a_line_costs_the_same_after_thousands_of_secrets() -> None:
    """Structural, not timed: with thousands held, a line is searched by its
    own windows, so the work done per line does not grow with the set."""
    secrets = Secrets()
    for i in range(8000):
        secrets.add(f"client-value-{i:08d}-xyz")
    line = "POST /v1/responses 200 12.5ms key=alice client-value-00000042-xyz"
    assert secrets.redact(line) == f"POST /v1/responses 200 12.5ms key=alice {REDACTED}"
    lookups = 0
    real = redaction._windows

    def counted(text: str, index: dict[str, list[str]]) -> list[str]:
        nonlocal lookups
        lookups += len(text)
        return real(text, index)

    redaction._windows = counted
    try:
        secrets.redact(line)
    finally:
        redaction._windows = real
    assert lookups < 4 * len(line)


_alphabet = string.ascii_letters[:6] + "-_ %/"


@given(
    st.lists(st.text(_alphabet, min_size=8, max_size=24), max_size=12),
    st.lists(st.text(_alphabet, min_size=0, max_size=8), max_size=10),
)
def test_the_window_search_redacts_as_the_plain_one(values: list[str], glue: list[str]) -> None:
    """Past 64 entries a text is searched by windows: the result is the same."""
    plain, indexed = Secrets(), Secrets()
    for value in values:
        plain.add(value)
        indexed.add(value)
    for i in range(40):
        indexed.add(f"filler-not-in-the-text-{i:04d}")
    text = "".join(g + (values[i % len(values)] if values else "") for i, g in enumerate(glue))
    text += "".join(v[: len(v) // 2 + 4] + " " + v[-9:] for v in values)
    assert indexed.redact(text) == plain.redact(text)
