"""Scenario 3: LangChain ``ChatOpenAI`` (Chat Completions and
``use_responses_api=True``): stream, invoke, and ``bind_tools`` with a client
tool while the server runs its own ``read_file`` (issue 10 item 13)."""

from __future__ import annotations

from pathlib import Path

import pytest
from clientcheck import Verdict, hermes, run_python

from hermes_trio.testing import TextReply, ToolCallReply

pytestmark = pytest.mark.clients("py")

APIS = ["chat", "responses"]
STORY = "Once upon a time — «trio» — a scheduler woke up. 🌙\n\nThe end."


def case(api: str, name: str) -> str:
    return name if api == "chat" else f"responses_{name}"


@pytest.mark.parametrize("api", APIS)
async def test_langchain_stream(api: str, tmp_path: Path) -> None:
    async with hermes([TextReply(STORY, delay=0.005)], tmp_path) as stack:
        run = await run_python(
            "py", "langchain_client.py", case(api, "stream"), stack.client, time_limit=60
        )
    v = Verdict(run)
    result = run.last("result")
    v.expect(result.get("text") == STORY, f"streamed text {result.get('text')!r}")
    v.expect(result.get("deltas", 0) > 5, f"{result.get('deltas')} deltas")
    v.finish()


@pytest.mark.parametrize("api", APIS)
async def test_langchain_invoke(api: str, tmp_path: Path) -> None:
    async with hermes([TextReply(STORY)], tmp_path) as stack:
        run = await run_python(
            "py", "langchain_client.py", case(api, "invoke"), stack.client, time_limit=60
        )
    v = Verdict(run)
    result = run.last("result")
    v.expect(result.get("text") == STORY, f"invoke text {result.get('text')!r}")
    v.expect(result.get("tool_calls") == [], f"tool calls {result.get('tool_calls')}")
    v.finish()


@pytest.mark.parametrize("api", APIS)
async def test_langchain_bind_tools(api: str, tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("Paris is in France.\n")
    script = [
        ToolCallReply([("read_file", {"path": "notes.txt"})]),
        ToolCallReply([("get_weather", {"city": "Paris"})]),
        TextReply("It is 21 °C and clear in Paris."),
    ]
    async with hermes(script, tmp_path) as stack:
        run = await run_python(
            "py", "langchain_client.py", case(api, "tools"), stack.client, time_limit=60
        )
        requests = [r.json for r in stack.model.model_requests]
    v = Verdict(run)
    names = run.last("tool_calls").get("names")
    v.expect(
        names == ["get_weather"],
        f"AIMessage.tool_calls holds {names}, expected only the client's get_weather"
        + (
            " (the server's own read_file leaked: issue 10 item 13)"
            if names and "read_file" in names
            else ""
        ),
    )
    v.expect(
        len(run.of("client_tool_ran")) == 1,
        f"the client tool ran {len(run.of('client_tool_ran'))} times",
    )
    answer = run.last("answer")
    v.expect(answer.get("text") == "It is 21 °C and clear in Paris.", f"answer {answer}")
    v.expect(answer.get("tool_calls") == [], f"tool calls in the answer {answer.get('tool_calls')}")
    last = requests[-1].get("messages", []) if requests else []
    v.expect(
        any(m.get("role") == "tool" and "21 °C" in str(m.get("content")) for m in last),
        "the client tool's result did not reach the model",
    )
    v.finish()


@pytest.mark.parametrize("api", APIS)
async def test_langchain_unused_fields_are_accepted(api: str, tmp_path: Path) -> None:
    """Issue 10 item 15, as LangChain users meet it."""
    async with hermes([TextReply("ok")] * 3, tmp_path) as stack:
        run = await run_python(
            "py", "langchain_client.py", case(api, "extra_fields"), stack.client, time_limit=60
        )
    v = Verdict(run)
    trials = run.of("trial")
    v.expect(len(trials) == (3 if api == "responses" else 2), f"{len(trials)} trials ran")
    for trial in trials:
        v.expect(
            trial["ok"],
            f"{trial['name']}: refused with {trial.get('status')} "
            f"{trial.get('message')!r} (issue 10 item 15)",
        )
    v.finish()
