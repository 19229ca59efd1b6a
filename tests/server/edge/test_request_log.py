"""The request log and ``X-Request-ID``."""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import stat
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
from support import api_stack, clean_env, start_serve

from hermes_trio.server.edge.request_log import RequestRecord, request_id, session_hash
from hermes_trio.testing import TextReply

KEY = "log-key"
CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


def test_request_ids_are_kept_when_sane_and_made_otherwise() -> None:
    assert request_id("abc-123_x.y:z") == "abc-123_x.y:z"
    for odd in (None, "", "a b", "x" * 129, "ünï", "a\nb"):
        made = request_id(odd)
        assert made.startswith("req_") and len(made) == 28
    key = b"k" * 32
    assert session_hash("s1", key) == session_hash("s1", key) != session_hash("s2", key)
    assert session_hash("s1", key) != session_hash("s1", b"other-install-secret")
    assert session_hash(None, key) is None


def test_a_line_holds_the_fields_and_never_the_raw_session() -> None:
    record = RequestRecord("req_1", "POST", "/v1/x", 10.0, status=429, error_code="c")
    record.session = session_hash("secret-session", b"k" * 32)
    line = record.line(10.25, as_json=True)
    fields = json.loads(line)
    assert fields["duration_ms"] == 250.0 and fields["status"] == 429
    assert "secret-session" not in line
    assert record.line(10.25, as_json=False).startswith("POST /v1/x 429 250.0ms")


async def test_every_answer_carries_a_request_id_and_every_request_a_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="hermes_trio.access")
    async with api_stack([TextReply("fine")], api={"key": KEY}) as (api, _):
        auth = {"Authorization": f"Bearer {KEY}"}
        async with httpx.AsyncClient(base_url=api.base_url, timeout=10) as http:
            ok = await http.post(
                "/chat/completions",
                json=CHAT,
                headers={**auth, "X-Request-ID": "client-chosen", "X-Session-ID": "sess"},
            )
            unauthorized = await http.post("/chat/completions", json=CHAT)
            missing = await http.get("/nowhere", headers=auth)
            refused = await http.get("/models", headers={**auth, "Origin": "https://evil.test"})
            odd = await http.get("/models", headers={**auth, "X-Request-ID": "bad id"})
    replies = [ok, unauthorized, missing, refused, odd]
    ids = [reply.headers.get("X-Request-ID") for reply in replies]
    assert ids[0] == "client-chosen"
    assert all(ids) and len(set(ids)) == len(ids)
    assert [r.status_code for r in replies] == [200, 401, 404, 403, 200]
    by_id = {
        rid: next(m for m in (r.getMessage() for r in caplog.records) if rid in m) for rid in ids
    }
    assert "200" in by_id["client-chosen"] and "tokens=" in by_id["client-chosen"]
    assert "key=default" in by_id["client-chosen"] and "session=" in by_id["client-chosen"]
    assert "sess " not in by_id["client-chosen"]
    assert "401" in by_id[ids[1]] and "error=invalid_api_key" in by_id[ids[1]]
    assert "403" in by_id[ids[3]] and "reason=" in by_id[ids[3]] and "origin" in by_id[ids[3]]


async def test_json_request_lines_from_the_real_command(tmp_path: Path) -> None:
    env = clean_env(HERMES_DATA_DIR=str(tmp_path / "data"))
    async with trio.open_nursery() as nursery:
        served = await start_serve(nursery, env, tmp_path, args=["--demo", "--log-format", "json"])
        async with httpx.AsyncClient(base_url=served.base_url, timeout=15) as http:
            reply = await http.get("/models", headers={"X-Request-ID": "json-1"})
            with trio.fail_after(5):
                await served.wait_for('"request_id": "json-1"')
        nursery.cancel_scope.cancel()
    line = next(line for line in served.output if '"request_id": "json-1"' in line)
    fields: dict[str, Any] = json.loads(line[line.index("{") :])
    assert fields["status"] == 200 and fields["path"] == "/v1/models"
    assert reply.headers["X-Request-ID"] == "json-1"


def test_every_value_of_a_line_has_its_control_characters_escaped() -> None:
    from hermes_trio.escapes import escape_controls

    nasty = "/v1/x\nFORGED 200\r\x1b[31m\u2028\x85\u202e"
    record = RequestRecord("req_1", "GET\n", nasty, 1.0, status=404, reason="host\nx")
    record.key_name = "k\x00"
    for as_json in (False, True):
        line = record.line(1.5, as_json=as_json)
        assert all(char.isprintable() for char in line), repr(line)
        assert "\\x0aFORGED" in line and "\\x1b[31m" in line and "\\u2028" in line
    assert escape_controls("/v1/日本 é ok") == "/v1/日本 é ok"


@pytest.mark.parametrize("log_format", ["text", "json"])
async def test_a_path_with_encoded_control_characters_forges_no_log_line(
    tmp_path: Path, log_format: str
) -> None:
    """%0a in a path is a newline once Quart decodes it: written as it is, it
    would start a log line of the client's choosing, without any key."""
    env = clean_env(HERMES_DATA_DIR=str(tmp_path / "data"))
    forged = "/v1/x%0aFORGED%0d%1b%5b31m%c2%85%e2%80%a8end"
    async with trio.open_nursery() as nursery:
        served = await start_serve(
            nursery, env, tmp_path, args=["--demo", "--log-format", log_format]
        )
        async with httpx.AsyncClient(timeout=15) as http:
            reply = await http.get(served.base_url.removesuffix("/v1") + forged)
            with trio.fail_after(5):
                await served.wait_for("end")
        nursery.cancel_scope.cancel()
    assert reply.status_code == 404
    # One line per request, whatever the path held: the newline, the
    # carriage return, the terminal escape and the separators log shippers
    # split on are all written as visible escapes.
    mentioning = [line for line in served.output if "FORGED" in line]
    assert len(mentioning) == 1, served.output
    line = mentioning[0]
    assert all(char.isprintable() for char in line), repr(line)
    shown = json.loads(line[line.index("{") :])["path"] if log_format == "json" else line
    assert "x\\x0aFORGED\\x0d\\x1b[31m\\x85\\u2028end" in shown
    assert not any(line.startswith("FORGED") for line in served.output)


async def test_the_session_hash_is_keyed_by_a_secret_of_this_install(tmp_path: Path) -> None:
    """A bare sha256 of a session id is reversed by hashing guesses; the
    hash is an HMAC under a secret kept 0600 in the data directory, the same
    after a restart."""
    data = tmp_path / "data"
    env = clean_env(HERMES_DATA_DIR=str(data))
    hashes = []
    for _ in range(2):
        async with trio.open_nursery() as nursery:
            served = await start_serve(
                nursery, env, tmp_path, args=["--demo", "--log-format", "json"]
            )
            async with httpx.AsyncClient(base_url=served.base_url, timeout=15) as http:
                await http.get(
                    "/models", headers={"X-Request-ID": "s-1", "X-Session-ID": "user-42"}
                )
                with trio.fail_after(5):
                    line = await served.wait_for('"request_id": "s-1"')
            nursery.cancel_scope.cancel()
        hashes.append(json.loads(line[line.index("{") :])["session"])
    assert hashes[0] == hashes[1]
    assert hashes[0] != hashlib.sha256(b"user-42").hexdigest()[:12]
    secret = data / "install-secret"
    assert stat.S_IMODE(secret.stat().st_mode) == 0o600
    key = bytes.fromhex(secret.read_text().strip())
    assert hashes[0] == hmac.new(key, b"user-42", hashlib.sha256).hexdigest()[:12]
