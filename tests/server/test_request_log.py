"""The request log and ``X-Request-ID``."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
from support import api_stack, clean_env, start_serve

from hermes_trio.server.request_log import RequestRecord, request_id, session_hash
from hermes_trio.testing import TextReply

KEY = "log-key"
CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


def test_request_ids_are_kept_when_sane_and_made_otherwise() -> None:
    assert request_id("abc-123_x.y:z") == "abc-123_x.y:z"
    for odd in (None, "", "a b", "x" * 129, "ünï", "a\nb"):
        made = request_id(odd)
        assert made.startswith("req_") and len(made) == 28
    assert session_hash("s1") == session_hash("s1") != session_hash("s2")
    assert session_hash(None) is None


def test_a_line_holds_the_fields_and_never_the_raw_session() -> None:
    record = RequestRecord("req_1", "POST", "/v1/x", 10.0, status=429, error_code="c")
    record.session = session_hash("secret-session")
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
