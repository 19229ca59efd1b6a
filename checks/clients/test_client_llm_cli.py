"""Scenario 6: Simon Willison's ``llm`` CLI with an ``extra-openai-models.yaml``
(in a temporary ``LLM_USER_PATH``) pointing at the server: a streamed prompt
over Chat Completions, the same with ``--no-stream``, and over the Responses
API (``responses: true``), also for a model declared ``reasoning: true`` (llm then
sends ``include: ["reasoning.encrypted_content"]``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from clientcheck import Verdict, client_env, environment, hermes, run_client

from hermes_trio.testing import TextReply

pytestmark = pytest.mark.clients("py")

ANSWER = "Nurseries hold the tasks — «trio» keeps them tidy. 🌙\nA second line, to be sure."


def user_path(tmp_path: Path, base_url: str, key: str, *, responses: bool, reasoning: bool) -> Path:
    where = tmp_path / "llm-user"
    where.mkdir()
    model = {
        "model_id": "hermes",
        "model_name": "hermes-agent",
        "api_base": base_url,
        "api_key_name": "hermes",
    }
    if responses:
        model["responses"] = True
    if reasoning:  # how llm's docs declare a reasoning model (gpt-5, o3, R1 upstream)
        model["reasoning"] = True
    # JSON is YAML; no yaml module needed on this side.
    (where / "extra-openai-models.yaml").write_text(json.dumps([model]))
    (where / "keys.json").write_text(json.dumps({"hermes": key}))
    return where


@pytest.mark.parametrize("mode", ["stream", "no-stream", "responses", "responses-reasoning"])
async def test_llm_cli_prompt(mode: str, tmp_path: Path) -> None:
    llm = str(environment("py") / "bin" / "llm")
    workdir = tmp_path / "work"
    workdir.mkdir()
    async with hermes([TextReply(ANSWER, delay=0.05)], workdir) as stack:
        where = user_path(
            tmp_path,
            stack.client["base_url"],
            stack.client["api_key"],
            responses=mode.startswith("responses"),
            reasoning=mode == "responses-reasoning",
        )
        argv = [llm, "-m", "hermes", "-o", "temperature", "0.3"]
        if mode == "no-stream":
            argv.append("--no-stream")
        argv.append("Tell me about trio.")
        run = await run_client(argv, time_limit=45, env=client_env(LLM_USER_PATH=str(where)))
        sent = stack.model.model_requests[0].json if stack.model.model_requests else {}
    v = Verdict(run)
    hint = (
        " (not named in issue 10: /v1/responses refuses a non-empty 'include')"
        if "'include'" in run.stderr
        else ""
    )
    v.expect(
        run.stdout == ANSWER + "\n", f"llm printed {run.stdout!r}, stderr {run.stderr!r}{hint}"
    )
    v.expect(sent.get("temperature") == 0.3, f"temperature did not reach the model: {sent}")
    if mode != "no-stream":
        # 11 tokens 50 ms apart: a streaming CLI prints them over ~0.5 s.
        reads = run.stdout_reads
        spread = reads[-1][0] - reads[0][0] if reads else 0.0
        v.expect(
            len(reads) >= 3 and spread >= 0.2,
            f"the answer was not printed as it arrived: {len(reads)} stdout reads "
            f"over {spread:.3f} s",
        )
    v.finish()
